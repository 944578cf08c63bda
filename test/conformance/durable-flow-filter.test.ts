// Apps claim only runs of their own durable flows: two apps on one store where only B has flow X, and a store-only app.
import { afterEach, describe, expect, it } from "vitest";
import pg from "pg";
import { createApp } from "../../src/app/app.ts";
import type { App } from "../../src/app/types.ts";
import { createTimeTravel, flow, type TimeTravel } from "../../src/index.ts";
import { createMemoryStore } from "../../src/store/memory/memory-store.ts";
import { createPostgresStore } from "../../src/store/postgres/postgres-store.ts";
import type { AcquiredRun, Store } from "../../src/store/types.ts";
import { recordingLogger, until } from "./app-fixture.ts";
import { TEST_DATABASE_URL } from "./drivers.ts";

const T0 = 1_000_000;
const HOUR = 3_600_000;

/** Two handles on one store: the same object (memory), or two pools on one schema (postgres). */
interface SharedStore {
  name: string;
  open(): Promise<{ a: Store; b: Store; cleanup: () => Promise<void> }>;
}

let seq = 0;
const shared: SharedStore[] = [
  {
    name: "memory",
    open: async () => {
      const store = createMemoryStore();
      return { a: store, b: store, cleanup: () => store.close() };
    },
  },
  {
    name: "postgres",
    open: async () => {
      const schema = `safety_filter_${process.pid}_${seq++}`;
      const make = () => createPostgresStore({ connectionString: TEST_DATABASE_URL, schema, poolSize: 4 });
      const a = make();
      const b = make();
      await a.open();
      await b.open();
      return {
        a,
        b,
        cleanup: async () => {
          await a.close();
          await b.close();
          const c = new pg.Client({ connectionString: TEST_DATABASE_URL });
          await c.connect();
          try {
            await c.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
          } finally {
            await c.end();
          }
        },
      };
    },
  },
];

/** Wraps a store so every run a claim or a scan handed out, and every journal call, is recorded. */
function watched(store: Store) {
  const seen = { claimed: [] as AcquiredRun[], listed: [] as string[], calls: [] as string[] };
  const journalReads = new Set(["claimDueRuns", "listOrphans", "nextWakeAt", "acquireRun", "releaseRun"]);
  const proxy = new Proxy(store, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver) as unknown;
      if (typeof value !== "function") return value;
      const fn = value as (...a: unknown[]) => unknown;
      if (typeof prop === "string" && journalReads.has(prop))
        return async (...args: unknown[]) => {
          seen.calls.push(prop);
          const out = await (fn.apply(target, args) as Promise<unknown>);
          if (prop === "claimDueRuns") seen.claimed.push(...(out as AcquiredRun[]));
          if (prop === "listOrphans") for (const r of out as { id: string }[]) seen.listed.push(r.id);
          return out;
        };
      return fn.bind(target);
    },
  });
  return { store: proxy, seen };
}

describe.each(shared)("durable runs of flows an app lacks, on $name", (fixture) => {
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    while (cleanups.length > 0) await cleanups.pop()!();
  });

  async function boot(store: Store, modules: Array<Record<string, unknown>>, time: TimeTravel) {
    const { logger, records } = recordingLogger();
    const app: App = createApp({ modules, env: "test", clock: time, store, logger });
    cleanups.push(() => app.stop({ timeoutMs: 2_000 }));
    await app.boot();
    return { app, records };
  }

  /** A durable flow that sleeps an hour between two steps; counts the second step per run. */
  const napper = (name: string, after: Map<string, number>) =>
    flow(name, {
      durable: true,
      do: async (_: unknown, fx) => {
        await fx.step("before", () => fx.runId);
        await fx.clock.sleep("nap", "1h");
        await fx.step("after", () => {
          after.set(fx.runId, (after.get(fx.runId) ?? 0) + 1);
          return true;
        });
      },
    });

  it("A (flow Y only) never claims X's due runs; B (flow X) resumes each exactly once", async () => {
    const { a, b, cleanup: drop } = await fixture.open();
    cleanups.push(drop);
    const time = createTimeTravel(T0);
    const afterX = new Map<string, number>();
    const afterY = new Map<string, number>();
    const wa = watched(a);
    const A = await boot(wa.store, [{ y: napper("jobs.y", afterY) }], time);
    const B = await boot(b, [{ x: napper("jobs.x", afterX) }], time);

    for (let i = 0; i < 10; i++) await B.app.invoke("jobs.x", {});
    for (let i = 0; i < 3; i++) await A.app.invoke("jobs.y", {});
    const xRuns = (await B.app.operator.runs({ flow: "jobs.x" })).map((r) => r.id);
    expect(xRuns).toHaveLength(10);

    // Every X run and Y run is due at once: both schedulers wake on the same tick.
    time.advance(HOUR);
    await until(
      async () => (await B.app.operator.runs({ status: "completed" })).length === 13,
      "all 13 runs completed",
    );
    await A.app.idle();
    await B.app.idle();

    expect([...afterX.keys()].sort()).toEqual([...xRuns].sort());
    expect([...afterX.values()].every((n) => n === 1)).toBe(true);
    expect([...afterY.values()]).toEqual([1, 1, 1]);
    expect(wa.seen.claimed.filter((r) => r.run.flow === "jobs.x")).toEqual([]);
    expect(wa.seen.claimed.map((r) => r.run.flow)).toContain("jobs.y");
    // A's logs say nothing about X: not its flow name, not one of its runs.
    const aLog = JSON.stringify(A.records);
    expect(aLog).not.toContain("jobs.x");
    for (const id of xRuns) expect(aLog).not.toContain(id);
  });

  it("while only A runs, X's due runs keep their status and wakeAt; B, started later, resumes each once", async () => {
    const { a, b, cleanup: drop } = await fixture.open();
    cleanups.push(drop);
    const time = createTimeTravel(T0);
    const afterX = new Map<string, number>();
    const B1 = await boot(b, [{ x: napper("jobs.x", afterX) }], time);
    for (let i = 0; i < 5; i++) await B1.app.invoke("jobs.x", {});
    await B1.app.stop({ timeoutMs: 2_000 });
    const parked = await B1.app.operator.runs({ flow: "jobs.x" });
    expect(parked.map((r) => r.status)).toEqual(Array(5).fill("sleeping"));

    const wa = watched(a);
    const A = await boot(wa.store, [{ y: napper("jobs.y", new Map()) }], time);
    time.advance(HOUR + 1);
    await A.app.idle();
    // A second wake tick, and a wake early from A, change nothing either.
    time.advance(10_000);
    await A.app.idle();
    expect(await A.app.wakeEarly(parked[0]!.id)).toEqual({ outcome: "wake time only", runId: parked[0]!.id });
    await A.app.idle();
    const after = await A.app.operator.runs({ flow: "jobs.x" });
    expect(after.map((r) => [r.id, r.status, r.leaseOwner])).toEqual(
      parked.map((r) => [r.id, "sleeping", null]),
    );
    expect(after.slice(1).map((r) => r.wakeAt)).toEqual(parked.slice(1).map((r) => r.wakeAt));
    expect(wa.seen.claimed).toEqual([]);
    expect(wa.seen.listed).toEqual([]);
    expect(wa.seen.calls).not.toContain("acquireRun");
    expect(JSON.stringify(A.records)).not.toContain("jobs.x");

    const B2 = await boot(b, [{ x: napper("jobs.x", afterX) }], time);
    await until(
      async () => (await B2.app.operator.runs({ status: "completed" })).length === 5,
      "B resumed all five",
    );
    expect([...afterX.values()]).toEqual([1, 1, 1, 1, 1]);
  });

  it("an app with no durable flows starts no wake scheduler and leaves due runs alone", async () => {
    const { a, b, cleanup: drop } = await fixture.open();
    cleanups.push(drop);
    const time = createTimeTravel(T0);
    const B = await boot(b, [{ x: napper("jobs.x", new Map()) }], time);
    for (let i = 0; i < 3; i++) await B.app.invoke("jobs.x", {});
    await B.app.stop({ timeoutMs: 2_000 });
    const parked = await B.app.operator.runs({ flow: "jobs.x" });
    time.advance(HOUR + 1);

    // A store-only app (a script that boots to operate on the store), with one plain flow.
    const wa = watched(a);
    const plain = flow("ops.count", { do: async () => (await wa.store.listRuns({})).length });
    const ops = await boot(wa.store, [{ plain }], time);
    expect(await ops.app.invoke("ops.count", {})).toBe(3);
    time.advance(HOUR);
    await ops.app.idle();
    await ops.app.stop({ timeoutMs: 2_000 });
    expect(wa.seen.calls).toEqual([]);
    expect(await B.app.operator.runs({ flow: "jobs.x" })).toEqual(parked);
  });
});
