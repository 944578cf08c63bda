// ClockOptions in the type: exactly one of cron / every, and a timezone only with cron, as clock() checks at run time.
import { describe, expect, expectTypeOf, it } from "vitest";
import { clock, type ClockOptions } from "./schedule.ts";

describe("ClockOptions type", () => {
  it("takes cron (with a zone) or every (without one), and nothing else", () => {
    // Before, every field was optional: {}, both, or every with a zone compiled and threw at declaration.
    expectTypeOf<{ cron: "0 7 * * *"; timezone: "Europe/Paris" }>().toMatchTypeOf<ClockOptions>();
    expectTypeOf<{ every: "1h"; retries: 1 }>().toMatchTypeOf<ClockOptions>();
    expectTypeOf<{ cron: "0 7 * * *"; every: "1h" }>().not.toMatchTypeOf<ClockOptions>();
    expectTypeOf<{ every: "1h"; timezone: "Europe/Paris" }>().not.toMatchTypeOf<ClockOptions>();
    expectTypeOf<{ retries: 1 }>().not.toMatchTypeOf<ClockOptions>();
    expect(clock("types.cron", { cron: "0 7 * * *", timezone: "Europe/Paris" }).spec.timezone).toBe(
      "Europe/Paris",
    );
    expect(clock("types.every", { every: "1h" }).spec.every).toBe("1h");
  });
});
