/** The wake scheduler: one timer on the earliest journal deadline, then claims due runs and resumes them. */
import type { Clock } from "../clock/clock.ts";
import type { Logger } from "../log/logger.ts";
import type { AcquiredRun, Store } from "../store/types.ts";
import type { Permits } from "./permits.ts";

export interface WakeSchedulerOptions {
  store: Store;
  clock: Clock;
  logger: Logger;
  /** Lease-holder token for one claim round. */
  nextOwner(): string;
  leaseMs: number;
  /** Claims per round. */
  batch?: number;
  /** Resume permits (`durable.concurrency`): a round claims at most the free ones. */
  permits: Permits;
  /** The durable flows this instance runs: claims and the wake timer see runs of these only. */
  flows: readonly string[];
  /** Continue a run this instance just acquired; releases its permit when done. */
  resume(acquired: AcquiredRun): Promise<void>;
}

/**
 * Keeps one timer on the nearest `wakeAt` (never a per-second poll). When it
 * fires, claims the due sleepers in batches — any instance may win a run, and
 * the store guarantees one winner — and resumes them.
 */
export class WakeScheduler {
  private running = false;
  private cancel: (() => void) | undefined;
  private armedAt = Infinity;
  private ticking = false;
  private again = false;
  private unsubscribe: (() => void) | undefined;
  private readonly resuming = new Set<Promise<void>>();
  private round: Promise<void> = Promise.resolve();

  constructor(private readonly o: WakeSchedulerOptions) {}

  get active(): number {
    return this.resuming.size;
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.unsubscribe = this.o.store.subscribe((e) => {
      if (e.kind === "wake") this.poke();
    });
    this.poke();
  }

  /** A wake time may have moved: re-arm (or run now). */
  poke(): void {
    if (!this.running) return;
    if (this.ticking) {
      this.again = true;
      return;
    }
    this.round = this.tick();
  }

  /** True while a claim round runs (it holds the permits it may claim with). */
  get claiming(): boolean {
    return this.ticking;
  }

  /** Resolves when the claim round in flight (if any) is done: its spare permits are back by then. */
  settled(): Promise<void> {
    return this.round;
  }

  private async tick(): Promise<void> {
    this.ticking = true;
    const batch = this.o.batch ?? 32;
    // All permits busy: due runs stay unclaimed (no lease held on a run we cannot run yet) and
    // the next released permit pokes us — arming on a past deadline would spin.
    let starved = false;
    try {
      do {
        this.again = false;
        starved = false;
        for (;;) {
          const max = this.o.permits.tryTake(batch);
          if (max === 0) {
            starved = true;
            break;
          }
          let due: AcquiredRun[];
          try {
            due = await this.o.store.claimDueRuns({
              owner: this.o.nextOwner(),
              now: this.o.clock.now(),
              max,
              leaseMs: this.o.leaseMs,
              flows: this.o.flows,
            });
          } catch (e) {
            this.o.permits.giveBack(max);
            throw e;
          }
          if (due.length < max) this.o.permits.giveBack(max - due.length);
          for (const run of due) this.track(run);
          if (due.length < max || !this.running) break;
        }
      } while (this.again && this.running);
      if (!starved) await this.arm();
    } catch (e) {
      this.o.logger.error({ err: e }, "wake scheduler: claim failed; retrying in 1 s");
      this.armAt(this.o.clock.now() + 1_000);
    } finally {
      this.ticking = false;
      if (this.again && this.running) this.poke();
    }
  }

  private track(run: AcquiredRun): void {
    const p = this.o
      .resume(run)
      .catch((e: unknown) =>
        this.o.logger.error({ err: e, runId: run.run.id }, "wake scheduler: resume failed"),
      )
      .finally(() => this.resuming.delete(p));
    this.resuming.add(p);
  }

  private async arm(): Promise<void> {
    const next = await this.o.store.nextWakeAt({ flows: this.o.flows });
    if (next === null || !this.running) return;
    this.armAt(next);
  }

  private armAt(at: number): void {
    if (this.cancel && this.armedAt <= at) return;
    this.cancel?.();
    this.armedAt = at;
    this.cancel = this.o.clock.at(at, () => {
      this.cancel = undefined;
      this.armedAt = Infinity;
      this.poke();
    });
  }

  async stop(timeoutMs: number): Promise<void> {
    this.running = false;
    this.unsubscribe?.();
    this.cancel?.();
    this.cancel = undefined;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.allSettled([...this.resuming]),
      new Promise<void>((r) => {
        timer = setTimeout(r, timeoutMs);
        timer.unref();
      }),
    ]);
    clearTimeout(timer);
  }
}
