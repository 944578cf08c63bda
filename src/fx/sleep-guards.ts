// Dev warnings for the silent sleep mistakes (an unknown duration: 0 ms; a sleep in a flow that is not durable), and once(), which fx's other warnings share.
import { isDuration } from "../clock/duration.ts";
import type { FxRuntime } from "./runtime.ts";

/** What each app has warned about already: one warning per flow (and per duration text), not per call. */
const warned = new WeakMap<FxRuntime, Set<string>>();

/** True the first time `key` is asked about in this app: a warning said once, not per call. */
export const once = (rt: FxRuntime, key: string): boolean => {
  let seen = warned.get(rt);
  if (seen === undefined) warned.set(rt, (seen = new Set()));
  if (seen.has(key)) return false;
  seen.add(key);
  return true;
};

/**
 * Outside prod, says so when `fx.clock.sleep` will not wait as the code reads:
 * a duration that is not `<integer><ms|s|m|h|d>` sleeps 0 ms, and a flow
 * without `durable: true` does not park at all.
 */
export function warnAboutSleep(
  rt: FxRuntime,
  flow: string,
  durable: boolean,
  label: string,
  duration: unknown,
): void {
  if (rt.env === "prod") return;
  if (!isDuration(duration)) {
    const shown = typeof duration === "string" ? JSON.stringify(duration) : durationText(duration);
    if (once(rt, `duration ${flow} ${typeof duration} ${shown}`))
      rt.logger.warn(
        { flow, label, duration: typeof duration === "string" ? duration : shown },
        duration === undefined
          ? `flow "${flow}": fx.clock.sleep("${label}") has no duration, so it waits 0 ms (the first argument is the label: fx.clock.sleep("${label}", "8h"))`
          : `flow "${flow}": fx.clock.sleep("${label}", ${shown}) is not a duration (<integer><ms|s|m|h|d>, e.g. "5s"), so it waits 0 ms`,
      );
  }
  if (!durable && once(rt, `not durable ${flow}`)) {
    rt.logger.warn(
      { flow, label },
      `flow "${flow}" is not durable: fx.clock.sleep("${label}") returns at once and the rest runs now (add durable: true to park the run)`,
    );
  }
}

/**
 * A sleep's duration as the text its journal entry keeps: a string as it is, none as "", anything
 * else plain JavaScript passed as it reads in code — `5000`, `NaN`, `5n`, `true`, `{"ms":5}`.
 */
export function durationText(duration: unknown): string {
  if (typeof duration === "string") return duration;
  if (duration === undefined) return "";
  if (duration === null) return "null";
  if (typeof duration === "bigint") return `${duration}n`;
  if (typeof duration === "number" || typeof duration === "boolean" || typeof duration === "symbol")
    return String(duration);
  if (typeof duration !== "object") return Object.prototype.toString.call(duration);
  try {
    return JSON.stringify(duration) ?? Object.prototype.toString.call(duration);
  } catch {
    return Object.prototype.toString.call(duration);
  }
}
