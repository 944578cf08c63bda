/** The process clock: the app's clock on the memory and file drivers, the wall clock at start advanced by the monotonic clock. */
import type { Clock } from "./clock.ts";
import { systemHostTime, type HostTime } from "./fleet-time.ts";

/**
 * A clock that reads the wall clock once and then advances by `host`'s
 * monotonic clock. A process on the memory or file driver is its own fleet:
 * every lease, wake time and retry it compares was written by itself, so one
 * that never steps is what keeps them apart from the host's clock. A host clock
 * step (NTP, ±40 s) then neither makes a live lease look expired (a handler in
 * flight run again) nor holds a timer back by the size of the step. The price:
 * a step the host takes while the process runs (a correction, a resume from
 * suspend, which the monotonic clock does not count) is followed only by the
 * next process. Values are integer epoch ms, never less than one read before.
 */
export function createProcessClock(
  host: HostTime = systemHostTime,
  wall: () => number = () => Date.now(),
): Clock {
  const origin = wall() - host.monotonic();
  // Whole ms, as Date.now(): stored as integers, and ids and journal times read them.
  const now = (): number => Math.floor(origin + host.monotonic());
  return {
    now,
    at(at, fn) {
      let cancel: () => void;
      let cancelled = false;
      const arm = (): void => {
        // setTimeout rounds to its loop's ms: re-checked on firing, so fn never sees now() < at.
        cancel = host.after(Math.max(0, at - now()), () => {
          if (cancelled) return;
          if (now() < at) arm();
          else fn();
        });
      };
      arm();
      return () => {
        cancelled = true;
        cancel();
      };
    },
  };
}

/** One per process, so every app of a process (and the stores they share) agrees on now(). */
export const processClock: Clock = createProcessClock();
