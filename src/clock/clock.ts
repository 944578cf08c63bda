/** The Clock interface and the system clock. */
/**
 * Every timestamp, lease and wake-up in okengine reads time from a Clock, so
 * tests can swap in time travel and never sleep for real.
 */
export interface Clock {
  /** Epoch milliseconds. */
  now(): number;
  /**
   * Calls `fn` once `now() >= at`. Returns a cancel function. The system clock
   * uses one real timer; time travel fires it when `advance`/`set` reach `at`.
   */
  at(at: number, fn: () => void): () => void;
}

/** Longest delay setTimeout accepts; longer waits are re-armed in hops. */
const MAX_TIMER_MS = 2_147_483_647;

export const systemClock: Clock = {
  now: () => Date.now(),
  at(at, fn) {
    let timer: NodeJS.Timeout | undefined;
    const arm = (): void => {
      const delay = at - Date.now();
      if (delay <= 0) {
        timer = undefined;
        fn();
        return;
      }
      timer = setTimeout(arm, Math.min(delay, MAX_TIMER_MS));
      timer.unref();
    };
    // Always fire asynchronously so callers never re-enter themselves.
    timer = setTimeout(arm, Math.max(0, Math.min(at - Date.now(), MAX_TIMER_MS)));
    timer.unref();
    return () => {
      if (timer) clearTimeout(timer);
      timer = undefined;
    };
  },
};
