// Store round trips per fired slot: one fire statement, no re-read of the schedules while nothing else changed.
import { describe, expect, it } from "vitest";
import { createLogger } from "../log/logger.ts";
import { createMemoryStore } from "../store/memory/memory-store.ts";
import type { FireRequest } from "../store/schedule-types.ts";
import type { Store } from "../store/types.ts";
import { ScheduleRuntime } from "./schedule-runtime.ts";
import { every } from "./schedule.ts";
import { createTimeTravel } from "./time-travel.ts";

/** The memory store, counting calls by method. */
function countingStore(): { store: Store; calls: Map<string, number> } {
  const inner = createMemoryStore();
  const calls = new Map<string, number>();
  const store = new Proxy(inner, {
    get(target, prop, receiver) {
      const v: unknown = Reflect.get(target, prop, receiver);
      if (typeof v !== "function" || typeof prop !== "string") return v;
      return (...args: unknown[]) => {
        calls.set(prop, (calls.get(prop) ?? 0) + 1);
        return (v as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  return { store, calls };
}

const settle = async (rt: ScheduleRuntime): Promise<void> => {
  for (let i = 0; i < 20; i++) {
    await rt.whenIdle();
    await new Promise((r) => setImmediate(r));
  }
};

describe("schedule runtime round trips", () => {
  it("each slot of 3 clocks costs one fireBatch and no listSchedules; a store wake costs one re-read", async () => {
    const { store, calls } = countingStore();
    const time = createTimeTravel(Date.parse("2026-05-01T10:00:00.500Z"));
    const rt = new ScheduleRuntime({
      store,
      clock: time,
      logger: createLogger({ format: "silent" }),
      clocks: ["a", "b", "c"].map((n) => ({ name: `c.${n}`, schedule: every("1s"), flow: `f.${n}` })),
    });
    await rt.start();
    await settle(rt);
    calls.clear();
    for (let i = 0; i < 5; i++) {
      time.advance("1s");
      await settle(rt);
    }
    expect(calls.get("fireBatch")).toBe(5);
    expect(calls.get("listSchedules") ?? 0).toBe(0);
    const fired = await store.listSchedules();
    expect(fired.map((r) => r.lastSlot)).toEqual(
      Array.from({ length: 3 }, () => Date.parse("2026-05-01T10:00:05Z")),
    );
    expect((await store.stats("clock:c.a", time.now())).pending).toBe(5);

    // Another instance's change arrives as a wake: one re-read, then the next slot fires as before.
    calls.clear();
    await store.setSchedulePaused("c.b", true, time.now());
    await settle(rt);
    expect(calls.get("listSchedules")).toBe(1);
    time.advance("1s");
    await settle(rt);
    expect(calls.get("fireBatch")).toBe(1);
    expect((await store.stats("clock:c.b", time.now())).pending).toBe(5);
    expect((await store.stats("clock:c.a", time.now())).pending).toBe(6);
    await rt.stop();
  });

  it("an instance that lost a slot to another (commit not yet visible) fires the next slot on time, re-reading first", async () => {
    const inner = createMemoryStore();
    const time = createTimeTravel(Date.parse("2026-05-01T10:00:00.500Z"));
    const S = Date.parse("2026-05-01T10:00:01Z");
    let lost: FireRequest[] | undefined;
    let commitOther = false;
    // This instance's view of the store: its fire of slot S is refused (another instance holds the
    // row) and takes 30 ms; the other instance's commit lands only after our read-back.
    const store = new Proxy(inner, {
      get(target, prop, receiver) {
        if (prop === "fireBatch")
          return async (reqs: FireRequest[]) => {
            if (lost === undefined && reqs.some((r) => r.slot === S)) {
              lost = reqs;
              time.advance(30);
              return reqs.map(() => false);
            }
            return target.fireBatch(reqs);
          };
        if (prop === "listSchedules")
          return async () => {
            const records = await target.listSchedules();
            if (lost !== undefined && !commitOther) {
              commitOther = true;
              await target.fireBatch(lost);
            }
            return records;
          };
        return Reflect.get(target, prop, receiver) as unknown;
      },
    });
    const rt = new ScheduleRuntime({
      store,
      clock: time,
      logger: createLogger({ format: "silent" }),
      clocks: [{ name: "c.x", schedule: every("1s"), flow: "f.x" }],
    });
    await rt.start();
    await settle(rt);
    time.advance(500); // slot S: refused, 30 ms spent
    await settle(rt);
    expect(commitOther).toBe(true);
    time.set(S + 1_000); // exactly the next slot
    await settle(rt);
    const [record] = await inner.listSchedules();
    expect(record).toMatchObject({ lastSlot: S + 1_000, lastFiredAt: S + 1_000, lastMissedRuns: 0 });
    await rt.stop();
  });
});
