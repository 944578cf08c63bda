// 200 000 items through the paths that used to spread arrays into calls (Math.min(...), push(...)): no stack overflow, nothing lost.
import { afterEach, describe, expect, it } from "vitest";
import { formatRoutes } from "../../src/cli/inspect.ts";
import { createTimeTravel } from "../../src/clock/time-travel.ts";
import { createLogger } from "../../src/log/logger.ts";
import { signal } from "../../src/signal/signal.ts";
import { WorkerPool } from "../../src/signal/worker-pool.ts";
import { createMemoryStore } from "../../src/store/memory/memory-store.ts";
import { createPostgresStore } from "../../src/store/postgres/postgres-store.ts";
import { dropSchema, freshSchema, PG_URL } from "../../src/store/postgres/test-support.ts";
import type { NewMessage, Store } from "../../src/store/types.ts";

const N = 200_000;
const T0 = 1_000_000;
const message = (i: number, s = "big.batch"): NewMessage => ({
  id: `m-${String(i).padStart(6, "0")}`,
  signal: s,
  key: null,
  payload: i,
  parentRunId: null,
});

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()!();
});

describe("200 000 items at once", () => {
  it("a worker pool whose one claim returns 200 000 messages buffers them all", async () => {
    const store = createMemoryStore();
    await store.enqueue(
      Array.from({ length: N }, (_, i) => message(i)),
      T0,
    );
    // Handlers never finish: the test looks at what the one claim brought in, then stops at once.
    const held = new Promise<void>(() => undefined);
    const pool = new WorkerPool({
      store,
      clock: createTimeTravel(T0),
      logger: createLogger({ format: "silent" }),
      signal: signal.once("big.batch"),
      worker: "w1",
      concurrency: 64,
      // Room for every message in one claim: the claim hands back an array of 200 000.
      prefetch: N,
      leaseMs: 600_000,
      handle: async () => {
        await held;
        return { kind: "ok" };
      },
    });
    cleanups.push(() => pool.stop(0));
    pool.start();
    while (pool.active < 64) await new Promise((r) => setTimeout(r, 5));
    // 64 handlers run, the other 199 936 wait in the buffer: none lost to the claim's size.
    expect(pool.leftIds()).toHaveLength(N);
    expect((await store.stats("big.batch", T0)).inflight).toBe(N);
  });

  it("200 000 concurrent emits on PostgreSQL share bounded group commits; every one is stored once", async () => {
    const schema = freshSchema("safety_big");
    const store: Store = createPostgresStore({
      connectionString: PG_URL,
      schema,
      poolSize: 4,
      notify: false,
    });
    await store.open();
    cleanups.push(async () => {
      await store.close();
      await dropSchema(schema);
    });
    await Promise.all(
      Array.from({ length: N }, (_, i) => store.enqueue([message(i, "big.pg")], T0 + (i % 7))),
    );
    expect(await store.stats("big.pg", T0)).toMatchObject({ pending: N, inflight: 0 });
  }, 180_000);

  it("formatRoutes lays out 200 000 routes", () => {
    const routes = Array.from({ length: N }, (_, i) => ({
      method: "GET",
      path: `/r/${i}`,
      flow: `f${i}`,
    }));
    const out = formatRoutes(routes as unknown as Parameters<typeof formatRoutes>[0]);
    expect(out.split("\n")).toHaveLength(N + 1);
    expect(out.split("\n")[1]).toBe(`GET     /r/0${" ".repeat(`/r/${N - 1}`.length - 4)}  f0`);
  });
});
