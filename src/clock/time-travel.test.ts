// createTimeTravel: bad advances and backward sets throw instead of moving time by 0 ms.
import { describe, expect, it } from "vitest";
import type { Duration } from "./duration.ts";
import { createTimeTravel } from "./time-travel.ts";

describe("createTimeTravel", () => {
  it("advances by a duration or milliseconds and fires what became due", async () => {
    const time = createTimeTravel(1_000);
    const fired: number[] = [];
    time.at(1_000 + 7 * 86_400_000, () => fired.push(time.now()));
    expect(time.advance("7d")).toBe(1_000 + 7 * 86_400_000);
    await Promise.resolve();
    expect(fired).toEqual([1_000 + 7 * 86_400_000]);
    expect(time.advance(5)).toBe(1_005 + 7 * 86_400_000);
    expect(time.advance("0s")).toBe(1_005 + 7 * 86_400_000);
  });

  it("a timer cancelled after the advance that made it due, before it ran, never fires", async () => {
    const time = createTimeTravel(0);
    const fired: string[] = [];
    let cancelB = (): void => {};
    // A fires first and cancels B, which the same advance made due.
    time.at(10, () => {
      fired.push("a");
      cancelB();
    });
    cancelB = time.at(20, () => fired.push("b"));
    const cancelC = time.at(30, () => fired.push("c"));
    time.advance(30);
    cancelC();
    await new Promise((r) => setImmediate(r));
    expect(fired).toEqual(["a"]);
  });

  it.each(["1 hour", "1.5h", "1w", "-5s", ""])("refuses the duration %j, naming it", (bad) => {
    const time = createTimeTravel(0);
    expect(() => time.advance(bad as Duration)).toThrow(TypeError);
    expect(() => time.advance(bad as Duration)).toThrow(`time.advance(${JSON.stringify(bad)})`);
    expect(time.now()).toBe(0);
  });

  it.each([-5, Number.NaN, Number.POSITIVE_INFINITY])("refuses %s milliseconds", (bad) => {
    const time = createTimeTravel(0);
    expect(() => time.advance(bad)).toThrow(RangeError);
    expect(() => time.advance(bad)).toThrow(`time.advance(${String(bad)})`);
    expect(time.now()).toBe(0);
  });

  it("set() only goes forward and refuses an instant that is not one", () => {
    const time = createTimeTravel(10_000);
    expect(() => time.set(Number.NaN)).toThrow(TypeError);
    expect(() => time.set(Number.NaN)).toThrow("time.set(NaN)");
    expect(() => time.set(new Date("nope"))).toThrow(TypeError);
    expect(time.set(5_000)).toBe(10_000);
    expect(time.set(new Date(20_000))).toBe(20_000);
    expect(time.now()).toBe(20_000);
  });
});
