// OKE1703: one clock name fires one flow with one declaration; each way of breaking that is told apart.
import { describe, expect, it } from "vitest";
import { adoptClock, type BoundClock } from "./bind-clock.ts";
import { clock, every } from "./schedule.ts";

const messageOf = (fn: () => unknown): string => {
  try {
    fn();
  } catch (e) {
    expect(e).toMatchObject({ code: "OKE1703" });
    return (e as Error).message;
  }
  throw new Error("no OKE1703");
};

describe("adoptClock", () => {
  it("one clock bound to two flows", () => {
    const clocks = new Map<string, BoundClock>();
    const nightly = clock("reports.nightly", { cron: "0 3 * * *" });
    adoptClock(clocks, nightly, "reports.a");
    expect(messageOf(() => adoptClock(clocks, nightly, "reports.b"))).toBe(
      'Clock "reports.nightly" is bound to more than one Flow (reports.a, reports.b).',
    );
  });

  it("two clocks sharing a name (an every() takes its flow's name)", () => {
    const clocks = new Map<string, BoundClock>();
    adoptClock(clocks, every("1h"), "x");
    expect(messageOf(() => adoptClock(clocks, clock("x", { every: "2h" }), "y"))).toBe(
      'Two clocks are named "x": one fires flow x, the other flow y.',
    );
  });

  it("one name declared twice with different options for one flow; the same declaration twice is fine", () => {
    const clocks = new Map<string, BoundClock>();
    adoptClock(clocks, clock("t", { every: "1h" }), "f");
    expect(() => adoptClock(clocks, clock("t", { every: "1h" }), "f")).not.toThrow();
    expect(messageOf(() => adoptClock(clocks, clock("t", { every: "2h" }), "f"))).toBe(
      'Clock "t" is declared twice with different options.',
    );
  });
});
