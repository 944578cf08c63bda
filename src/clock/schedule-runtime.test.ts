// Store round trips per fired slot: one fire statement, no re-read of the schedules while nothing else changed.
import { afterEach, describe, expect, it, vi } from "vitest";
import { gate } from "../../test/conformance/app-fixture.ts";
import { hostClockSteps, within } from "../../test/support/host-clock-step.ts";
import { createLogger } from "../log/logger.ts";
import { createMemoryStore } from "../store/memory/memory-store.ts";
import type { FireRequest } from "../store/schedule-types.ts";
import type { Store } from "../store/types.ts";
import { systemClock } from "./clock.ts";
import { FOLLOWER_DELAY_MS, ScheduleRuntime } from "./schedule-runtime.ts";
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

  it("an instance that lost a slot to another (commit not yet visible) follows: it checks the next slot FOLLOWER_DELAY_MS late, re-reading first, and leads again once it fires", async () => {
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
    time.set(S + 1_000); // exactly the next slot: the leader's to fire, and it is gone
    await settle(rt);
    expect((await inner.listSchedules())[0]).toMatchObject({ lastSlot: S });
    time.set(S + 1_000 + FOLLOWER_DELAY_MS);
    await settle(rt);
    expect((await inner.listSchedules())[0]).toMatchObject({
      lastSlot: S + 1_000,
      lastFiredAt: S + 1_000 + FOLLOWER_DELAY_MS,
      lastMissedRuns: 0,
    });
    // It won that fire, so it leads: the slot after fires on time, no lateness carried on.
    time.set(S + 2_000);
    await settle(rt);
    expect((await inner.listSchedules())[0]).toMatchObject({ lastSlot: S + 2_000, lastFiredAt: S + 2_000 });
    await rt.stop();
  });

  it("of two instances firing together, the one that lost follows: one fire statement per slot, and it takes over when the leader stops", async () => {
    const inner = createMemoryStore();
    const time = createTimeTravel(Date.parse("2026-05-01T10:00:00.500Z"));
    const S = Date.parse("2026-05-01T10:00:01Z");
    const fires: Array<{ who: string; at: number; won: number }> = [];
    const instance = (who: string): ScheduleRuntime =>
      new ScheduleRuntime({
        store: new Proxy(inner, {
          get(target, prop, receiver) {
            if (prop === "fireBatch")
              return async (reqs: FireRequest[]) => {
                const out = await target.fireBatch(reqs);
                fires.push({ who, at: time.now(), won: out.filter((x) => x).length });
                return out;
              };
            return Reflect.get(target, prop, receiver) as unknown;
          },
        }),
        clock: time,
        logger: createLogger({ format: "silent" }),
        clocks: ["a", "b"].map((n) => ({ name: `c.${n}`, schedule: every("1s"), flow: `f.${n}` })),
      });
    const a = instance("a");
    const b = instance("b");
    await a.start();
    await b.start();
    await Promise.all([settle(a), settle(b)]);
    fires.length = 0;

    // Slot S: both fire on it; one statement wins both schedules, the other wins none.
    time.set(S);
    await Promise.all([settle(a), settle(b)]);
    expect(fires.map((f) => f.at)).toEqual([S, S]);
    expect(fires.map((f) => f.won).sort()).toEqual([0, 2]);
    const leader = fires.find((f) => f.won === 2)!.who;
    const [lead, follow] = leader === "a" ? [a, b] : [b, a];

    // From then on only the leader fires: the follower looks 25 ms later, reads, finds nothing due.
    fires.length = 0;
    for (let i = 1; i <= 3; i++) {
      time.set(S + i * 1_000);
      await Promise.all([settle(a), settle(b)]);
      time.set(S + i * 1_000 + FOLLOWER_DELAY_MS);
      await Promise.all([settle(a), settle(b)]);
    }
    expect(fires).toEqual([1, 2, 3].map((i) => ({ who: leader, at: S + i * 1_000, won: 2 })));

    // The leader stops: the follower fires the next slot 25 ms late, once, then on time.
    await lead.stop();
    fires.length = 0;
    time.set(S + 4_000);
    await settle(follow);
    expect(fires).toEqual([]);
    time.set(S + 4_000 + FOLLOWER_DELAY_MS);
    await settle(follow);
    time.set(S + 5_000);
    await settle(follow);
    const other = leader === "a" ? "b" : "a";
    expect(fires).toEqual([
      { who: other, at: S + 4_000 + FOLLOWER_DELAY_MS, won: 2 },
      { who: other, at: S + 5_000, won: 2 },
    ]);
    expect((await inner.listSchedules()).map((r) => r.lastMissedRuns)).toEqual([0, 0]);
    await follow.stop();
  });
});

describe("schedule runtime on fleet time (fleetTime: true) and host clock steps", () => {
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it("a host clock step of -40 s does not hold the next slot back: the timer runs on fleet time", async () => {
    const clock = hostClockSteps();
    const inner = createMemoryStore();
    await inner.open();
    let fired = gate<number>();
    // A store with a clock of its own (as PostgreSQL's): the real time, whatever the host's reads.
    const store = new Proxy(inner, {
      get(target, prop, receiver) {
        if (prop === "storeTime") return () => Promise.resolve(clock.wall());
        if (prop === "fireBatch")
          return async (reqs: FireRequest[]) => {
            const out = await target.fireBatch(reqs);
            fired.open(reqs[0]!.slot);
            return out;
          };
        return Reflect.get(target, prop, receiver) as unknown;
      },
    });
    const rt = new ScheduleRuntime({
      store,
      clock: systemClock,
      logger: createLogger({ format: "silent" }),
      clocks: [{ name: "c.tick", schedule: every("1s"), flow: "f.tick" }],
      fleetTime: true,
    });
    try {
      await rt.start();
      const first = await within(fired.promise, 15_000, "the first slot");
      // The next slot's timer is armed once the check that fired the first one ends.
      await settle(rt);
      fired = gate<number>();
      clock.step(-40_000);
      const next = await within(fired.promise, 15_000, "the next slot, a second later");
      expect(next).toBeGreaterThan(first);
      // Fleet time did not step with the host clock.
      expect(Math.abs(rt.now() - clock.wall())).toBeLessThan(5_000);
    } finally {
      await rt.stop();
      await inner.close();
    }
  });
});

describe("a failed schedule check", () => {
  it("is tried again after 100 ms, doubling to 1 s, so a store back within the second fires the slot on its own (no missed run)", async () => {
    const inner = createMemoryStore();
    const time = createTimeTravel(Date.parse("2026-05-01T10:00:00.500Z"));
    const S = Date.parse("2026-05-01T10:00:01Z");
    let failures = 0;
    const tries: number[] = [];
    const store = new Proxy(inner, {
      get(target, prop, receiver) {
        const v: unknown = Reflect.get(target, prop, receiver);
        if (prop !== "fireBatch" || typeof v !== "function") return v;
        return (...args: unknown[]) => {
          tries.push(time.now() - S);
          if (failures-- > 0)
            return Promise.reject(
              Object.assign(new Error("Connection terminated unexpectedly"), { code: "57P01" }),
            );
          return (v as (...a: unknown[]) => unknown).apply(target, args);
        };
      },
    });
    const rt = new ScheduleRuntime({
      store,
      clock: time,
      logger: createLogger({ format: "silent" }),
      clocks: [{ name: "tick", schedule: every("1s"), flow: "f.tick" }],
    });
    await rt.start();
    await settle(rt);
    // The slot at S: its fire fails three times (a connection dropped and replaced), then lands.
    failures = 3;
    time.set(S);
    await settle(rt);
    for (let t = 50; t <= 950; t += 50) {
      time.set(S + t);
      await settle(rt);
    }
    expect(tries).toEqual([0, 100, 300, 700]);
    const [fire] = await inner.listFires("tick", 1);
    expect(fire).toMatchObject({ slot: S, firedAt: S + 700, missedRuns: 0 });

    // A longer outage: the waits double up to 1 s, never more.
    tries.length = 0;
    failures = 6;
    for (let t = 1_000; t <= 5_000; t += 50) {
      time.set(S + t);
      await settle(rt);
    }
    expect(tries.slice(0, 7)).toEqual([1_000, 1_100, 1_300, 1_700, 2_500, 3_500, 4_500]);
    await rt.stop();
  });
});
