/** The duration grammar ("500ms", "3s", "2m", "1h", "3d") → milliseconds. */
const UNIT_MS = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;
const DURATION = /^(\d+)(ms|s|m|h|d)$/;

type Digit = "0" | "1" | "2" | "3" | "4" | "5" | "6" | "7" | "8" | "9";
type DurationUnit = keyof typeof UNIT_MS;

/**
 * A wait as a string: an integer and a unit, `"200ms"`, `"30s"`, `"2m"`, `"8h"`, `"7d"`. An integer
 * (`${bigint}`) that starts with a digit, not `${number}`: that one took `"1.5h"`, `"-5m"` and
 * `"1e3s"`, which the grammar reads as 0 ms, so the type let through what it exists to catch. The
 * price: a duration built from a number (`` `${n}ms` ``) is `${number}ms` to TypeScript and needs
 * `as Duration` once the number is known to be a whole one.
 */
export type Duration = `${bigint}${DurationUnit}` & `${Digit}${string}`;

/** True for the texts parseDuration understands (anything else means 0 ms). */
export const isDuration = (text: unknown): text is Duration =>
  typeof text === "string" && DURATION.test(text);

/**
 * `text` as a Duration, or a TypeError naming it. For a duration that comes from configuration
 * (`duration(process.env.TRIAL_LENGTH ?? "3d")` where a module loads): the type checker cannot see
 * such a string, and a sleep given one that is not a duration waits 0 ms, as the grammar says.
 * Checked once, at boot, it fails there instead. `what` names it in the error.
 */
export function duration(text: unknown, what = "duration"): Duration {
  if (isDuration(text)) return text;
  const shown = typeof text === "string" ? JSON.stringify(text) : String(text);
  throw new TypeError(
    `${what}: ${shown} is not a duration: an integer and a unit, ms, s, m, h or d ("500ms", "30s", "2m", "8h", "3d")`,
  );
}

/**
 * Parses `integer + ms|s|m|h|d` into milliseconds. Anything else is 0 ms (wake
 * at once), as documented: "8 hours", "1w", "1.5h" and "" all parse to 0.
 * `d` is exactly 86 400 000 ms, never a calendar day.
 */
export function parseDuration(text: string | number): number {
  if (typeof text === "number") return Number.isFinite(text) && text > 0 ? Math.floor(text) : 0;
  const m = DURATION.exec(text);
  if (!m) return 0;
  return Number(m[1]) * UNIT_MS[m[2] as keyof typeof UNIT_MS];
}
