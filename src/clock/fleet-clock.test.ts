// FleetClock: the database's clock advanced by a monotonic one, so host clock steps move neither now() nor timers.
import { afterEach, describe, expect, it } from "vitest";
import { recordingLogger } from "../../test/conformance/app-fixture.ts";
import { systemClock, type Clock } from "./clock.ts";
import { FleetClock } from "./fleet-clock.ts";
import { hostTimeOf, MAX_HOLD_MS, systemHostTime, type HostTime } from "./fleet-time.ts";
import { createTimeTravel } from "./time-travel.ts";

/** The host clock reads this at monotonic 0 (a whole second, so re-measures fall at +60.5 s). */
const T0 = 1_800_000_000_000;

/**
 * A host and a database driven by one time-travel clock (true elapsed time): the host's wall
 * clock can step, its monotonic clock can run fast by `rate`, the database's clock can step.
 */
function rig(o: { rate?: number; dbAhead?: number } = {}) {
  const truth = createTimeTravel(0);
  const rate = o.rate ?? 1;
  const s = { wallStep: 0, dbStep: 0, dbDown: false, reads: 0 };
  const db = (): number => T0 + (o.dbAhead ?? 0) + s.dbStep + truth.now();
  const wall: Clock = {
    now: () => T0 + truth.now() + s.wallStep,
    // As the system clock does: a monotonic timer, re-checked against the wall clock when it fires.
    at(at, fn) {
      let cancel: () => void;
      const arm = (): void => {
        cancel = truth.at(truth.now() + Math.max(0, at - wall.now()), () =>
          wall.now() >= at ? fn() : arm(),
        );
      };
      arm();
      return () => cancel();
    },
  };
  const host: HostTime = {
    monotonic: () => truth.now() * rate,
    after: (ms, fn) => truth.at(truth.now() + ms / rate, fn),
  };
  const { logger, records } = recordingLogger();
  /** The warnings logged so far. */
  const warns = (): string[] => records.filter((r) => r.level === 40).map((r) => String(r.msg));
  const storeTime = (): Promise<number> => {
    s.reads++;
    return s.dbDown ? Promise.reject(new Error("connect ECONNREFUSED")) : Promise.resolve(db());
  };
  const clock = new FleetClock(wall, storeTime, logger, host);
  /** Moves true time by `ms` and lets the timers and measurements that became due run. */
  const advance = async (ms: number): Promise<void> => {
    truth.advance(ms);
    await new Promise((r) => setImmediate(r));
  };
  return { clock, wall, db, s, warns, advance, stop: () => clock.stop() };
}

const stops: Array<() => void> = [];
afterEach(() => {
  for (const stop of stops.splice(0)) stop();
});
const started = async (r: ReturnType<typeof rig>) => {
  stops.push(r.stop);
  await r.clock.start();
  return r;
};

describe("FleetClock and host clock steps", () => {
  it("a host clock step of +40 s, then -40 s, between measurements does not move now()", async () => {
    const { clock, db, s, advance } = await started(rig());
    expect(clock.now()).toBe(db());
    await advance(4_000);
    s.wallStep = 40_000; // an NTP step forward, 4 s after boot
    expect(clock.now()).toBe(db());
    await advance(2_200);
    expect(clock.now()).toBe(db());
    s.wallStep = -40_000; // and back, past where it started
    expect(clock.now()).toBe(db());
    await advance(10_000);
    expect(clock.now()).toBe(db());
  });

  it("a lease another instance wrote stays live on a host whose clock stepped +40 s", async () => {
    const { clock, db, s, advance } = await started(rig());
    const expiresAt = db() + 30_000; // written by a healthy instance: 30 s lease
    s.wallStep = 40_000;
    await advance(2_200);
    expect(clock.now()).toBeLessThan(expiresAt);
    await advance(27_799);
    expect(clock.now()).toBeLessThan(expiresAt);
    await advance(1);
    expect(clock.now()).toBe(expiresAt);
  });

  it("a timer fires when fleet time reaches it, though the host clock stepped -40 s or +40 s meanwhile", async () => {
    const { clock, db, s, advance } = await started(rig());
    const fired: string[] = [];
    const at = db() + 10_000;
    clock.at(at, () => fired.push("back"));
    clock.at(at + 1_000, () => fired.push("forward"));
    await advance(1_000);
    s.wallStep = -40_000;
    await advance(8_999);
    expect(fired).toEqual([]);
    await advance(1);
    expect(fired).toEqual(["back"]);
    s.wallStep = 40_000;
    await advance(999);
    expect(fired).toEqual(["back"]);
    await advance(1);
    expect(fired).toEqual(["back", "forward"]);
    expect(clock.now()).toBe(at + 1_000);
  });

  it("a re-measure after the step keeps fleet time and warns that the host clock is off", async () => {
    const { clock, db, s, warns, advance } = await started(rig());
    s.wallStep = -40_000;
    await advance(61_000); // past the re-measure at +60.5 s (fleet time)
    expect(warns()).toEqual([expect.stringContaining("this host's clock is 40000 ms off the database's")]);
    expect(clock.now()).toBe(db());
    expect(clock.offset()).toBe(40_000);
    s.wallStep = 0; // NTP fixed it
    await advance(60_000);
    expect(clock.now()).toBe(db());
    expect(clock.offset()).toBe(0);
  });

  it("a host 40 s slow at boot reads the database's clock, and stepping right keeps it there", async () => {
    const { clock, db, s, warns, advance } = await started(rig({ dbAhead: 40_000 }));
    expect(warns().join()).toContain("40000 ms off");
    expect(clock.now()).toBe(db());
    s.wallStep = 40_000;
    await advance(5_000);
    expect(clock.now()).toBe(db());
    expect(clock.offset()).toBe(0);
  });
});

describe("FleetClock across re-measures", () => {
  it("a monotonic clock 100 ppm fast is corrected at the re-measure, holding still rather than going back", async () => {
    const { clock, db, advance } = await started(rig({ rate: 1.0001 }));
    await advance(60_400);
    const before = clock.now();
    // Ahead of the database by 6 ms: the re-measure would put it back that much.
    expect(before - db()).toBe(6);
    await advance(200); // the re-measure runs (fleet time +60.5 s)
    const after = clock.now();
    expect(after).toBeGreaterThanOrEqual(before);
    expect(after - db()).toBeLessThanOrEqual(6);
    const seen = [after];
    for (let i = 0; i < 10; i++) {
      await advance(1);
      seen.push(clock.now());
    }
    expect(seen).toEqual([...seen].sort((a, b) => a - b));
    // Caught up: on the database's clock again.
    expect(clock.now()).toBe(db());
  });

  it("a database clock that steps back by more than MAX_HOLD_MS is followed back, with a warning", async () => {
    const { clock, db, s, warns, advance } = await started(rig());
    s.dbStep = -(MAX_HOLD_MS + 4_000);
    expect(clock.now()).toBe(db() + MAX_HOLD_MS + 4_000);
    await advance(61_000);
    expect(clock.now()).toBe(db());
    expect(warns().join()).toContain("moved back");
  });

  it("a database clock that steps forward is followed at the next re-measure", async () => {
    const { clock, db, s, advance } = await started(rig());
    s.dbStep = 5_000;
    await advance(30_000);
    expect(clock.now()).toBe(db() - 5_000);
    await advance(31_000);
    expect(clock.now()).toBe(db());
  });

  it("with the database down at boot it reads the host clock as of boot, and a step does not move it", async () => {
    const r = rig();
    r.s.dbDown = true;
    const { clock, db, s, warns, advance } = await started(r);
    expect(warns().join()).toContain("could not read the database's time");
    expect(clock.now()).toBe(db());
    s.wallStep = -40_000;
    await advance(61_000); // the re-measure fails again
    expect(clock.now()).toBe(db());
    s.dbDown = false;
    await advance(60_000);
    expect(clock.now()).toBe(db());
  });

  it("a re-measure that fails keeps the last measurement", async () => {
    const { clock, db, s, warns, advance } = await started(rig({ dbAhead: 10_000 }));
    expect(clock.now()).toBe(db());
    s.dbDown = true;
    s.wallStep = 40_000;
    await advance(61_000);
    expect(warns().join()).toContain("keeping the last measurement");
    expect(clock.now()).toBe(db());
  });

  it("re-measures once a minute (five round trips), and no more after stop()", async () => {
    const { clock, s, advance } = await started(rig());
    expect(s.reads).toBe(5);
    await advance(60_000);
    expect(s.reads).toBe(5);
    await advance(1_000);
    expect(s.reads).toBe(10);
    clock.stop();
    await advance(120_000);
    expect(s.reads).toBe(10);
  });
});

describe("FleetClock over other clocks", () => {
  it("over time travel, fleet time moves with advance and set, and timers fire when they are reached", async () => {
    const tt = createTimeTravel(T0);
    const clock = new FleetClock(tt, () => Promise.resolve(tt.now() + 5_000), recordingLogger().logger);
    stops.push(() => clock.stop());
    await clock.start();
    expect(clock.now()).toBe(T0 + 5_000);
    const fired: number[] = [];
    clock.at(T0 + 8_000, () => fired.push(clock.now()));
    tt.advance("2s");
    await Promise.resolve();
    expect(clock.now()).toBe(T0 + 7_000);
    expect(fired).toEqual([]);
    tt.set(T0 + 3_000);
    await new Promise((r) => setImmediate(r));
    expect(fired).toEqual([T0 + 8_000]);
  });

  it("under the system clock, a step of Date.now() moves neither now() nor a timer", async () => {
    const real = Date.now.bind(Date);
    const clock = new FleetClock(systemClock, () => Promise.resolve(real()), recordingLogger().logger);
    stops.push(() => clock.stop());
    await clock.start();
    try {
      Date.now = () => real() + 40_000;
      // Tolerances of seconds: the step is 40 s, a loaded machine's scheduling is not.
      expect(Math.abs(clock.now() - real())).toBeLessThan(5_000);
      Date.now = () => real() - 40_000;
      expect(Math.abs(clock.now() - real())).toBeLessThan(5_000);
      const due = clock.now() + 20;
      const firedAt = await new Promise<number>((resolve, reject) => {
        clock.at(due, () => resolve(clock.now()));
        // The timer is 20 ms away; a wall-clock timer would wait for the 40 s step.
        setTimeout(() => reject(new Error("the timer waited for the host clock")), 20_000).unref();
      });
      expect(firedAt).toBeGreaterThanOrEqual(due);
    } finally {
      Date.now = real;
    }
  });

  it("the system clock's host time is performance.now(); its timers fire asynchronously and cancel", async () => {
    expect(hostTimeOf(systemClock)).toBe(systemHostTime);
    const fired: string[] = [];
    const cancel = systemHostTime.after(0, () => fired.push("cancelled"));
    cancel();
    await new Promise<void>((resolve) => {
      systemHostTime.after(0, () => {
        fired.push("fired");
        resolve();
      });
      expect(fired).toEqual([]);
    });
    expect(fired).toEqual(["fired"]);
  });
});
