/** createTimeTravel: a frozen clock for tests whose timers fire only when time is advanced. */
import type { Clock } from "./clock.ts";
import { isDuration, parseDuration, type Duration } from "./duration.ts";

export interface TimeTravel extends Clock {
  /**
   * Moves time forward by a duration (`"7d"`: an integer and ms|s|m|h|d) or a non-negative
   * number of milliseconds, firing what became due. Anything else throws (a typo must not
   * silently move time by 0 ms).
   */
  advance(by: Duration | number): number;
  /**
   * Jumps to an absolute epoch-ms instant (or a Date), firing what became due. Time only goes
   * forward: an instant before now leaves it where it is (and returns it); NaN throws.
   */
  set(to: number | Date): number;
  /** When the earliest pending timer is due (epoch ms), or undefined when none is pending. */
  nextTimer(): number | undefined;
}

const show = (v: unknown): string => (typeof v === "string" ? JSON.stringify(v) : String(v));

/** Milliseconds of an advance, or a clear error naming the bad value (and the call: `what`). */
export function advanceMs(by: unknown, what = "time.advance"): number {
  if (typeof by === "number") {
    if (Number.isFinite(by) && by >= 0) return by;
    throw new RangeError(
      `${what}(${show(by)}): expected a non-negative finite number of milliseconds (time only goes forward)`,
    );
  }
  if (typeof by === "string" && isDuration(by)) return parseDuration(by);
  throw new TypeError(
    `${what}(${show(by)}): expected milliseconds or a duration like "500ms", "30s", "2m", "8h", "7d" (an integer and a unit)`,
  );
}

interface Pending {
  at: number;
  seq: number;
  fn: () => void;
  cancelled: boolean;
}

/**
 * A frozen clock for tests. Time only moves when the test says so; timers that
 * become due fire on a microtask after the move, in deadline order.
 */
export function createTimeTravel(start: number | Date = 0): TimeTravel {
  let now = typeof start === "number" ? start : start.getTime();
  let seq = 0;
  const pending: Pending[] = [];

  const fireDue = (): void => {
    pending.sort((a, b) => a.at - b.at || a.seq - b.seq);
    while (pending.length > 0 && pending[0]!.at <= now) {
      const p = pending.shift()!;
      // Checked again when the microtask runs: a timer cancelled between the move and then stays quiet.
      if (!p.cancelled)
        queueMicrotask(() => {
          if (!p.cancelled) p.fn();
        });
    }
  };

  const moveTo = (to: number): number => {
    if (to > now) now = to;
    fireDue();
    return now;
  };

  return {
    now: () => now,
    at(at, fn) {
      const p: Pending = { at, seq: seq++, fn, cancelled: false };
      if (at <= now) {
        queueMicrotask(() => {
          if (!p.cancelled) fn();
        });
      } else {
        pending.push(p);
      }
      return () => {
        p.cancelled = true;
      };
    },
    advance: (by) => moveTo(now + advanceMs(by)),
    nextTimer() {
      let next: number | undefined;
      for (const p of pending) if (!p.cancelled && (next === undefined || p.at < next)) next = p.at;
      return next;
    },
    set: (to) => {
      const ms = to instanceof Date ? to.getTime() : to;
      if (typeof ms !== "number" || !Number.isFinite(ms))
        throw new TypeError(`time.set(${show(to)}): expected epoch milliseconds or a valid Date`);
      return moveTo(ms);
    },
  };
}
