// The duration grammar and the time-travel clock.
import { describe, expect, it } from "vitest";
import { parseDuration } from "./duration.ts";
import { createTimeTravel } from "./time-travel.ts";

describe("duration grammar", () => {
  it.each([
    ["200ms", 200],
    ["30s", 30_000],
    ["2m", 120_000],
    ["1h", 3_600_000],
    ["7d", 604_800_000],
    ["1d", 86_400_000],
    ["0s", 0],
  ])("%s = %d ms", (text, ms) => expect(parseDuration(text)).toBe(ms));

  it.each(["8 hours", "1w", "1.5h", "", "h", "-1s", " 1s", "1S", "10"])(
    "unknown %j parses as 0 ms",
    (text) => {
      expect(parseDuration(text)).toBe(0);
    },
  );
});

describe("time travel", () => {
  it("never moves by itself and fires timers in deadline order when advanced", async () => {
    const t = createTimeTravel(1_000);
    const fired: string[] = [];
    t.at(1_000 + 5_000, () => fired.push("5s"));
    t.at(1_000 + 1_000, () => fired.push("1s"));
    const cancel = t.at(1_000 + 2_000, () => fired.push("cancelled"));
    cancel();
    expect(t.now()).toBe(1_000);
    t.advance("3s");
    await Promise.resolve();
    expect(fired).toEqual(["1s"]);
    expect(t.advance(2_000)).toBe(6_000);
    await Promise.resolve();
    expect(fired).toEqual(["1s", "5s"]);
  });

  it("set jumps forward only; a timer already due fires on the next microtask", async () => {
    const t = createTimeTravel(new Date(0));
    t.set(10_000);
    t.set(5_000);
    expect(t.now()).toBe(10_000);
    let ran = false;
    t.at(9_000, () => (ran = true));
    expect(ran).toBe(false);
    await Promise.resolve();
    expect(ran).toBe(true);
  });
});
