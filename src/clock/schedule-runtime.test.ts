// Store round trips per fired slot: one fire statement, no re-read of the schedules while nothing else changed.
import { describe, expect, it } from "vitest";
import { createLogger } from "../log/logger.ts";
import { createMemoryStore } from "../store/memory/memory-store.ts";
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
});
