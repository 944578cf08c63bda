// The process clock: the wall clock at start, then the monotonic clock, so steps of Date.now() move neither now() nor timers.
import { afterEach, describe, expect, it, vi } from "vitest";
import { hostClockSteps, within } from "../../test/support/host-clock-step.ts";
import { createProcessClock, processClock } from "./process-clock.ts";

afterEach(() => {
  vi.restoreAllMocks();
});

/** Tolerance of seconds: the steps are 40 s, a loaded machine's scheduling is not. */
const NEAR_MS = 5_000;

describe("process clock", () => {
  it("now() reads the wall clock it started on, and does not follow a step of Date.now() either way", () => {
    const clock = hostClockSteps();
    const a = processClock.now();
    expect(Number.isInteger(a)).toBe(true);
    expect(Math.abs(a - clock.wall())).toBeLessThan(NEAR_MS);
    clock.step(40_000);
    const b = processClock.now();
    expect(Math.abs(b - clock.wall())).toBeLessThan(NEAR_MS);
    clock.step(-40_000);
    const c = processClock.now();
    expect(Math.abs(c - clock.wall())).toBeLessThan(NEAR_MS);
    expect(a <= b && b <= c).toBe(true);
  });

  it("a clock made after a step starts from the stepped wall clock (the next process follows the host)", () => {
    const clock = hostClockSteps();
    clock.step(40_000);
    const later = createProcessClock();
    expect(Math.abs(later.now() - (clock.wall() + 40_000))).toBeLessThan(NEAR_MS);
  });

  it("a timer 20 ms ahead fires 20 ms later after a -40 s step, and not before its time after a +40 s step", async () => {
    const clock = hostClockSteps();
    clock.step(-40_000);
    const due = processClock.now() + 20;
    const back = await within(
      new Promise<number>((resolve) => processClock.at(due, () => resolve(processClock.now()))),
      15_000,
      "the timer after a step back",
    );
    expect(back).toBeGreaterThanOrEqual(due);
    clock.step(40_000);
    const ahead = processClock.now() + 20;
    const fwd = await within(
      new Promise<number>((resolve) => processClock.at(ahead, () => resolve(processClock.now()))),
      15_000,
      "the timer after a step forward",
    );
    expect(fwd).toBeGreaterThanOrEqual(ahead);
  });

  it("timers fire asynchronously, and a cancelled one never", async () => {
    const fired: string[] = [];
    processClock.at(0, () => fired.push("cancelled"))();
    await new Promise<void>((resolve) => {
      processClock.at(processClock.now(), () => {
        fired.push("fired");
        resolve();
      });
      expect(fired).toEqual([]);
    });
    expect(fired).toEqual(["fired"]);
  });
});
