/** A counting semaphore bounding how many durable resumes run at once (`durable.concurrency`). */

/**
 * Permits for resumes. `tryTake` never waits (the wake scheduler and the
 * orphan scan take only what is free, so they never hold a lease on a run they
 * cannot run yet); `take` waits in FIFO order (a redelivery, already bounded
 * by its worker pool). Every release tells `onFree`, so the scheduler claims again.
 */
export class Permits {
  private used = 0;
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
    if (this.free > 0) this.onFree();
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
