// A backlog of healthy handlers that take 60 % of the lease, with the default prefetch: each message runs once and is delivered.
import { describe, expect, it } from "vitest";
import { createApp, createTimeTravel, flow, on, signal } from "../index.ts";
import { createMemoryStore } from "../store/memory/memory-store.ts";

describe("handlers that take most of the lease, a backlog, the default prefetch", () => {
  it("every message runs once and is delivered: none started late, run twice or dead-lettered as crashed", async () => {
    // The operator audit's case (3 s handlers, 5 s lease, concurrency 8, 150 messages at once): 30
    // ended dead as "crashed", 66 ran more than once. Here on the test clock, so no timing matters.
    const time = createTimeTravel(1_700_000_000_000);
    const runs = new Map<number, number>();
    const jobs = signal.once<{ n: number }>("slow.jobs");
    const worker = on(
      jobs,
      flow("slow.work", {
        do: async ({ n }: { n: number }) => {
          runs.set(n, (runs.get(n) ?? 0) + 1);
          await new Promise<void>((r) => time.at(time.now() + 3_000, r));
        },
      }),
    );
    const store = createMemoryStore();
    const app = createApp({
      modules: [{ jobs, worker }],
      env: "test",
      clock: time,
      store,
      config: { signals: { leaseMs: 5_000, concurrency: 8 } },
    });
    await app.start({ port: 0, host: "127.0.0.1" });
    try {
      for (let n = 0; n < 150; n++) await app.emit(jobs, { n });
      // 150 runs of 3 s on 8 slots: ~57 s of test time, moved 100 ms at a time.
      for (let step = 0; step < 2_000; step++) {
        const st = await store.stats("slow.jobs", time.now());
        if (st.pending + st.inflight === 0) break;
        time.advance(100);
        for (let i = 0; i < 3; i++) await new Promise((r) => setImmediate(r));
      }
      const st = await store.stats("slow.jobs", time.now());
      expect({ delivered: st.delivered, dead: st.dead, pending: st.pending, inflight: st.inflight }).toEqual({
        delivered: 150,
        dead: 0,
        pending: 0,
        inflight: 0,
      });
      expect([...runs.values()].filter((c) => c > 1)).toEqual([]);
      expect(runs.size).toBe(150);
    } finally {
      await app.stop({ timeoutMs: 1_000 });
      await store.close();
    }
  });
});
