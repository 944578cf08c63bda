// WorkerPool.stop: once it stopped waiting, nothing starts — not a buffered message, not a late claim's.
import { afterEach, describe, expect, it } from "vitest";
import { gate, recordingLogger, until } from "../../test/conformance/app-fixture.ts";
import { createTimeTravel } from "../clock/time-travel.ts";
import { createMemoryStore } from "../store/memory/memory-store.ts";
import type { ClaimedMessage, Store } from "../store/types.ts";
import { signal } from "./signal.ts";
import { WorkerPool, type HandlerOutcome } from "./worker-pool.ts";

const T0 = 1_000_000;
const SIGNAL = "pool.stop";

/** A store whose `method` answers only when the test opens the gate (while `gated` is set), or fails (while `failing`). */
function gatedCall(store: Store, method: keyof Store) {
  const state = { gated: false, failing: false, waiting: 0, answered: 0, gate: gate() };
  const proxy = new Proxy(store, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver) as unknown;
      if (typeof value !== "function") return value;
      const fn = (value as (...a: unknown[]) => unknown).bind(target);
      if (prop !== method) return fn;
      return async (...args: unknown[]) => {
        if (state.gated) {
          state.waiting++;
          await state.gate.promise;
        }
        if (state.failing) {
          state.waiting++;
          throw new Error("store closed (test)");
        }
        const r = await fn(...args);
        state.answered++;
        return r;
      };
    },
  });
  return { store: proxy, state };
}

/** Lets every promise callback queued so far run (one macrotask), no wall-clock wait. */
const turn = (): Promise<void> => new Promise((r) => setImmediate(r));

describe("WorkerPool.stop", () => {
  const closers: Array<() => Promise<void>> = [];
  afterEach(async () => {
    while (closers.length > 0) await closers.pop()!();
  });

  async function setup(o: { method?: keyof Store; handle: (m: ClaimedMessage) => Promise<HandlerOutcome> }) {
    const raw = createMemoryStore();
    await raw.open();
    closers.push(() => raw.close());
    const { store, state } = gatedCall(raw, o.method ?? "claim");
    const { logger, records } = recordingLogger();
    const pool = new WorkerPool({
      store,
      clock: createTimeTravel(T0),
      logger,
      signal: signal.once(SIGNAL),
      worker: "w1",
      concurrency: 1,
      prefetch: 1,
      leaseMs: 30_000,
      handle: o.handle,
    });
    const emit = (id: string) =>
      raw.enqueue([{ id, signal: SIGNAL, key: null, payload: null, parentRunId: null }], T0);
    return { raw, pool, state, records, emit };
  }

  it("a handler that ends after the deadline does not start the buffered message behind it", async () => {
    const ran: string[] = [];
    const hung = gate<HandlerOutcome>();
    const t = await setup({
      handle: (m) => {
        ran.push(m.id);
        return m.id === "m1" ? hung.promise : Promise.resolve({ kind: "ok" });
      },
    });
    await t.emit("m1");
    await t.emit("m2");
    t.pool.start();
    // One claim took both: m1 runs in the one slot, m2 waits in the buffer.
    await until(() => ran.length === 1 && t.pool.leftIds().length === 2, "m1 running, m2 buffered");
    await t.pool.stop(0); // m1 is still running: the deadline ends the wait
    hung.open({ kind: "ok" });
    await until(async () => (await t.raw.getMessage("m1"))?.status === "delivered", "m1's settle");
    await turn();

    expect(ran).toEqual(["m1"]);
    // Left to lazy reclaim under the claim it came with.
    expect(await t.raw.getMessage("m2")).toMatchObject({ status: "inflight", attempts: 1 });
  });

  it("a claim in flight that answers after the deadline starts nothing; its messages are left to their lease, logged", async () => {
    const ran: string[] = [];
    const t = await setup({
      handle: (m) => {
        ran.push(m.id);
        return Promise.resolve({ kind: "ok" });
      },
    });
    await t.emit("m1");
    t.state.gated = true;
    t.pool.start();
    await until(() => t.state.waiting === 1, "the first claim");
    await t.pool.stop(0); // the claim is still out: the deadline ends the wait
    t.state.gate.open();
    await until(() => t.state.answered === 1, "the claim's answer");
    await turn();

    expect(ran).toEqual([]);
    expect(await t.raw.getMessage("m1")).toMatchObject({ status: "inflight", attempts: 1 });
    expect(t.records).toContainEqual(
      expect.objectContaining({
        level: 40,
        messageIds: ["m1"],
        msg: "a claim sent before stop answered after it with 1 message(s): not run here; they are claimed again once their lease (30 s) lapses",
      }),
    );
  });

  it("the settle of a handler that ends after stop gets one try: a failure is given up, not retried with timers", async () => {
    const hung = gate<HandlerOutcome>();
    const t = await setup({ method: "settle", handle: () => hung.promise });
    await t.emit("m1");
    t.pool.start();
    await until(() => t.pool.active === 1, "m1 running");
    await t.pool.stop(0);
    // The store refuses every settle from now on (it is closing under the stopped app).
    t.state.failing = true;
    hung.open({ kind: "ok" });
    const gaveUp = (r: Record<string, unknown>) =>
      typeof r.msg === "string" && r.msg.startsWith("settle of 1 message(s) given up (stopping)");
    await until(() => t.records.some(gaveUp), "the settle given up");

    expect(t.state.waiting).toBe(1);
    expect(t.records.filter((r) => r.msg === "settle failed; retrying")).toEqual([]);
    expect(await t.raw.getMessage("m1")).toMatchObject({ status: "inflight", attempts: 1 });
  });

  it("a claim in flight that answers before the deadline runs its messages, and stop waits for them", async () => {
    const ran: string[] = [];
    const hung = gate<HandlerOutcome>();
    const t = await setup({
      handle: (m) => {
        ran.push(m.id);
        return hung.promise;
      },
    });
    await t.emit("m1");
    t.state.gated = true;
    t.pool.start();
    await until(() => t.state.waiting === 1, "the first claim");
    let stopped = false;
    const stopping = t.pool.stop(600_000).then(() => (stopped = true));
    t.state.gate.open();
    await until(() => ran.length === 1, "m1 started under the claim that was in flight");
    expect(stopped).toBe(false);
    hung.open({ kind: "ok" });
    await stopping;
    expect(await t.raw.getMessage("m1")).toMatchObject({ status: "delivered", attempts: 1 });
  });
});
