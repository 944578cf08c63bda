/** sharedRead: one store read shared by every Console viewer while it is expensive, so open tabs do not multiply a full count. */

export interface SharedReadOptions {
  /** Milliseconds, monotonic (performance.now): staleness is wall time, whatever the app clock says. */
  now?: () => number;
  /** A read faster than this is never shared: cheap counts stay exact at every request. */
  slowMs?: number;
  /** A slow read's result is reused for this many times its own duration. */
  reuseFactor?: number;
}

/**
 * Wraps `read` (a count over a whole table, like `runCounts` on PostgreSQL: 250–650 ms at
 * 1 000 000 runs, re-read every 2 s by each open overview). While the last read took at least
 * `slowMs`, callers join a read in flight and reuse a result younger than `reuseFactor` × its
 * duration, so however many viewers poll, the store spends at most about 1 / (1 + reuseFactor) of
 * one connection on it. A fast read is run for every caller, as if unwrapped. A failed read is
 * not kept.
 */
export function sharedRead<T>(read: () => Promise<T>, o: SharedReadOptions = {}): () => Promise<T> {
  const now = o.now ?? (() => performance.now());
  const slowMs = o.slowMs ?? 50;
  const reuseFactor = o.reuseFactor ?? 10;
  let last: { value: T; at: number; tookMs: number } | undefined;
  let inFlight: Promise<T> | undefined;
  return () => {
    const slow = last !== undefined && last.tookMs >= slowMs;
    if (slow && inFlight !== undefined) return inFlight;
    if (slow && now() - last!.at < reuseFactor * last!.tookMs) return Promise.resolve(last!.value);
    const started = now();
    const reading = read().then((value) => {
      const at = now();
      last = { value, at, tookMs: at - started };
      return value;
    });
    inFlight = reading;
    const settled = (): void => {
      if (inFlight === reading) inFlight = undefined;
    };
    void reading.then(settled, settled);
    return reading;
  };
}
