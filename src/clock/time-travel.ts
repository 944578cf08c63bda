/** createTimeTravel: a frozen clock for tests whose timers fire only when time is advanced. */
import type { Clock } from "./clock.ts";
import { parseDuration } from "./duration.ts";

export interface TimeTravel extends Clock {
  /** Moves time forward by a duration (`"7d"`) or milliseconds, firing what became due. */
  advance(by: string | number): number;
  /** Jumps to an absolute epoch-ms instant (never backwards), firing what became due. */
  set(ms: number): number;
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
      if (!p.cancelled) queueMicrotask(p.fn);
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
    advance: (by) => moveTo(now + (typeof by === "number" ? by : parseDuration(by))),
    set: (ms) => moveTo(ms),
  };
}
