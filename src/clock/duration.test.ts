// The duration grammar, and duration()/isDuration() for durations read from configuration: a bad one fails where it is read, not as a 0 ms sleep.
import { describe, expect, expectTypeOf, it } from "vitest";
import { duration, isDuration, parseDuration, type Duration } from "./duration.ts";

describe("duration()", () => {
  it("gives a duration back as it is, typed Duration", () => {
    const read: string = "3d";
    const d = duration(read);
    expectTypeOf(d).toEqualTypeOf<Duration>();
    expect(d).toBe("3d");
    expect(parseDuration(d)).toBe(259_200_000);
    for (const ok of ["0ms", "500ms", "30s", "2m", "8h", "7d"]) expect(duration(ok)).toBe(ok);
  });

  it("refuses what the grammar would read as 0 ms, naming the value and what it is", () => {
    expect(() => duration("3 days", "TRIAL_LENGTH")).toThrow(
      new TypeError(
        'TRIAL_LENGTH: "3 days" is not a duration: an integer and a unit, ms, s, m, h or d ("500ms", "30s", "2m", "8h", "3d")',
      ),
    );
    for (const bad of ["", "1.5h", "-5m", "1e3s", "1w", "8", " 8h", "8H"])
      expect(() => duration(bad)).toThrow(`duration: ${JSON.stringify(bad)} is not a duration`);
    for (const bad of [undefined, 5000, null, Number.NaN]) expect(() => duration(bad)).toThrow(TypeError);
    expect(() => duration(undefined, "TRIAL_LENGTH")).toThrow(/^TRIAL_LENGTH: undefined is not a duration/);
  });

  it("isDuration narrows a string to Duration", () => {
    const read: string = "45s";
    if (isDuration(read)) expectTypeOf(read).toEqualTypeOf<Duration>();
    expect([isDuration("45s"), isDuration("45 s"), isDuration(45)]).toEqual([true, false, false]);
  });
});
