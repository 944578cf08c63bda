// WorkerPool settle retries: a failed settle is retried with backoff until it commits or the lease is gone.
import { describe, expect, it } from "vitest";
import { pino } from "pino";
import { until } from "../../test/conformance/app-fixture.ts";
import { createTimeTravel } from "../clock/time-travel.ts";
import { createMemoryStore } from "../store/memory/memory-store.ts";
import type { Store } from "../store/types.ts";
import { signal } from "./signal.ts";
import { WorkerPool } from "./worker-pool.ts";

/** The pool against a memory store whose settle fails `failures` times (as during an outage). */
function setup(failures: number, outage?: { since: number }) {
  const inner = createMemoryStore();
  const store: Store = Object.create(inner) as Store;
  // A store that knows it is down (its health), as PostgreSQL's and the file driver's do.
  if (outage !== undefined)
    store.health = () =>
      left >= 0 ? { ok: false, since: outage.since, reason: "connection refused" } : { ok: true };
  let left = failures;
  let tries = 0;
  const nows: number[] = [];
  store.settle = (batch, now) => {
    tries++;
    nows.push(now);
    if (left-- > 0) return Promise.reject(new Error("connect ECONNREFUSED 127.0.0.1:5432"));
    return inner.settle(batch, now);
  };
  const lines: Array<{
    msg: string;
    level: number;
    err?: unknown;
    error?: string;
    gaveUp?: Array<{ id: string }>;
  }> = [];
  const clock = createTimeTravel(1_000_000);
  const ran: string[] = [];
  const pool = new WorkerPool({
    store,
    clock,
    logger: pino({ level: "debug" }, { write: (l: string) => void lines.push(JSON.parse(l)) }),
    signal: signal.once("retry.test"),
    worker: "w1",
    concurrency: 4,
    prefetch: 0,
    leaseMs: 30_000,
    handle: (m) => {
      ran.push(m.id);
      return Promise.resolve({ kind: "ok" });
    },
  });
  const emit = (id: string) =>
    inner.enqueue([{ id, signal: "retry.test", key: null, payload: null, parentRunId: null }], 1_000_000);
  return { inner, pool, clock, lines, ran, emit, nows, tries: () => tries };
}

describe("WorkerPool settle retries", () => {
  it("a settle that fails is retried until it commits; the message is delivered, not left to its lease", async () => {
    const t = setup(3);
    await t.emit("m1");
    t.pool.start();
    await until(
      async () => (await t.inner.getMessage("m1"))?.status === "delivered",
      "delivered after retries",
    );
    expect(t.tries()).toBe(4);
    expect(t.ran).toEqual(["m1"]);
    expect(t.lines.filter((l) => l.msg === "settle failed; retrying")).toHaveLength(3);
    await t.pool.stop(1_000);
  });

  it("during an outage the store knows of, the retries are warned about once, with the error's text and no stack; the rest at debug", async () => {
    const t = setup(4, { since: 999_000 });
    await t.emit("m1");
    t.pool.start();
    await until(async () => (await t.inner.getMessage("m1"))?.status === "delivered", "delivered");
    const retries = t.lines.filter((l) => l.msg === "settle failed; retrying");
    expect(retries.map((l) => l.level)).toEqual([40, 20, 20, 20]);
    expect(retries[0]).toMatchObject({ error: "connect ECONNREFUSED 127.0.0.1:5432" });
    expect(retries.some((l) => l.err !== undefined)).toBe(false);
    await t.pool.stop(1_000);
  });

  it("every retry of a settle sends the first try's now: a retry after a lost commit is the same request", async () => {
    const t = setup(2);
    await t.emit("m1");
    t.pool.start();
    await until(() => t.tries() >= 1, "first settle tried");
    t.clock.advance(1_000);
    await until(
      async () => (await t.inner.getMessage("m1"))?.status === "delivered",
      "delivered after retries",
    );
    expect(t.nows).toHaveLength(3);
    expect(new Set(t.nows).size).toBe(1);
    await t.pool.stop(1_000);
  });

  it("gives a settle up once the lease ran out a lease ago, and logs the ids it gave up", async () => {
    const t = setup(Infinity);
    await t.emit("m1");
    t.pool.start();
    await until(() => t.tries() >= 1, "first settle tried");
    t.clock.advance(60_000); // lease (30 s) + another lease
    await until(() => t.lines.some((l) => l.msg.startsWith("settle of 1 message(s) given up")), "given up");
    const line = t.lines.find((l) => l.msg.startsWith("settle of 1 message(s) given up"))!;
    expect(line.gaveUp).toEqual([{ id: "m1", status: "delivered" }]);
    await t.pool.stop(1_000);
  });

  it("stop() gives retrying settles up at the shutdown deadline", async () => {
    const t = setup(Infinity);
    await t.emit("m1");
    t.pool.start();
    await until(() => t.tries() >= 1, "first settle tried");
    await t.pool.stop(200);
    expect(
      t.lines.some(
        (l) =>
          l.msg ===
          "settle of 1 message(s) given up (stopping): they are reclaimed after their lease and run again",
      ),
    ).toBe(true);
  });
});
