/** A counting semaphore bounding how many durable resumes run at once (`durable.concurrency`). */

/**
 * Permits for resumes. `tryTake` never waits (the wake scheduler and the
 * orphan scan take only what is free, so they never hold a lease on a run they
 * cannot run yet); `take` waits in FIFO order (a redelivery, already bounded
 * by its worker pool). A release tells `onFree` (so the scheduler claims again)
 * only when some `tryTake` found no permit since the last time it told: the
 * due runs that taker left are the scheduler's. Otherwise every resume's end
 * would cost a claim and a nextWakeAt that find nothing (2 statements per
 * resume on postgres).
 */
export class Permits {
  private used = 0;
  /** A tryTake got nothing since onFree was last told: work waits for a permit. */
  private refused = false;
  private readonly waiters: Array<() => void> = [];

  constructor(
    readonly limit: number,
    private readonly onFree: () => void = () => {},
  ) {}

  get free(): number {
    return Math.max(0, this.limit - this.used);
  }

  /** Takes up to `n` free permits at once; returns how many it took. */
  tryTake(n = 1): number {
    const k = Math.min(n, this.free);
    this.used += k;
    if (k === 0 && n > 0) this.refused = true;
    return k;
  }

  /** Waits for one permit. */
  take(): Promise<void> {
    if (this.tryTake(1) === 1) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  /** Gives back `n` permits after a resume: to waiters first, then tells `onFree`. */
  release(n = 1): void {
    this.giveBack(n);
    if (this.free > 0 && this.refused) {
      this.refused = false;
      this.onFree();
    }
  }

  /** Gives back permits taken but not used (a claim found fewer runs), without telling `onFree`. */
  giveBack(n: number): void {
    for (let i = 0; i < n; i++) {
      const next = this.waiters.shift();
      if (next) next();
      else this.used--;
    }
  }
}
