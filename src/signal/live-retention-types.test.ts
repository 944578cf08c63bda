// signal.live's retention is typed as a Duration, so a bad one fails to compile as it fails at declaration.
import { describe, expect, expectTypeOf, it } from "vitest";
import type { Duration } from "../clock/duration.ts";
import { signal, type LiveOptions } from "./signal.ts";

describe("signal.live retention type", () => {
  it("takes the duration grammar and refuses other text at compile time", () => {
    // Before, `retention?: string` let "1 week" compile; the declaration then threw at module load.
    expectTypeOf<LiveOptions<unknown>["retention"]>().toEqualTypeOf<Duration | undefined>();
    expect(signal.live("types.retention.ok", { retention: "7d" }).retention).toBe("7d");
    // @ts-expect-error -- not a duration ("1 week" is no unit of the grammar)
    expect(() => signal.live("types.retention.bad", { retention: "1 week" })).toThrow(
      /retention must be a duration/,
    );
  });
});
