/** Retention of finished durable runs: a stoppable timer that prunes completed and failed runs in bounded batches. */
import type { Clock } from "../clock/clock.ts";
import type { Logger } from "../log/logger.ts";
import type { RunRetentionStore } from "../store/retention-types.ts";

/** Runs one batch deletes; small enough that a batch never holds up claims for long. */
export const RUN_PRUNE_BATCH = 500;
/** Sweeps at most this often (and at least once per retention period). */
const SWEEP_MS = 3_600_000;

export interface RunRetentionOptions {
  store: RunRetentionStore;
  clock: Clock;
  logger: Logger;
  /** Finished runs older than this (by last update) are deleted. */
  retentionMs: number;
  batch?: number;
}

export class RunRetention {
  private cancel: (() => void) | undefined;
  private running = false;
  private stopped = false;
  private sweeping: Promise<unknown> | undefined;

  constructor(private readonly o: RunRetentionOptions) {}

  /** Arms the sweep; after stop() it does nothing (an app whose boot went on after its stop). */
  start(): void {
    if (this.running || this.stopped) return;
    this.running = true;
    this.arm(this.o.clock.now());
  }

  /**
   * Arms the next sweep one period after `from`, the time the last one was due — not after the sweep
   * ended: a clock that jumped while a sweep ran (time travel, a suspended host) gets its sweep at
   * once instead of a full period later. At most one catch-up sweep, never one per missed period.
   */
  private arm(from: number): void {
    if (!this.running) return;
    const every = Math.min(this.o.retentionMs, SWEEP_MS);
    const due = from + every;
    this.cancel = this.o.clock.at(due, () => {
      if (!this.running) return;
      this.sweeping = this.sweep().finally(() => {
        this.sweeping = undefined;
        this.arm(Math.max(due, this.o.clock.now() - every));
      });
    });
  }

  /** Deletes every finished run past retention, one batch at a time, yielding between batches; returns the count. */
  async sweep(): Promise<number> {
    const batch = this.o.batch ?? RUN_PRUNE_BATCH;
    let total = 0;
    try {
      for (;;) {
        // Checked after every await (the yield below included): no batch goes out after stop().
        if (this.stopped) break;
        const n = await this.o.store.pruneRuns(this.o.clock.now() - this.o.retentionMs, batch);
        total += n;
        if (n < batch) break;
        // Let claims and handlers in between batches.
        await new Promise((r) => setImmediate(r));
      }
    } catch (e) {
      // The next sweep retries; nothing is lost by pruning later.
      this.o.logger.warn(
        { err: e, pruned: total },
        "durable retention: pruning finished runs failed; retrying at the next sweep",
      );
      return total;
    }
    if (total > 0) this.o.logger.info({ pruned: total }, "durable retention: finished runs pruned");
    return total;
  }

  /** Cancels the timer and waits for the sweep in progress, which sends no batch after this. */
  async stop(): Promise<void> {
    this.running = false;
    this.stopped = true;
    this.cancel?.();
    await this.sweeping;
  }
}
