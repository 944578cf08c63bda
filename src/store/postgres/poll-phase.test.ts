// The safety-net poll ticks half a second off the whole second, away from schedule slots.
import { describe, expect, it } from "vitest";
import { nextPollAt } from "./postgres-wake.ts";

describe("poll tick phase", () => {
  it("a slow poll ticks at x.500 s, within half a second of its interval; a fast one evenly", () => {
    const t0 = Date.parse("2026-05-01T10:00:00.000Z");
    for (const now of [t0, t0 + 1, t0 + 499, t0 + 500, t0 + 999, t0 + 12_345]) {
      const at = nextPollAt(now, 5_000);
      expect(at % 1_000).toBe(500);
      expect(Math.abs(at - (now + 5_000))).toBeLessThanOrEqual(500);
      expect(at).toBeGreaterThan(now);
    }
    expect(nextPollAt(t0 + 7, 20)).toBe(t0 + 27);
    expect(nextPollAt(t0 + 7, 500)).toBe(t0 + 507);
  });
});
