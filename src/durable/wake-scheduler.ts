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

/** Sleeps due further ahead than this are left to the store's deadline alone (not held). */
const HOLD_HORIZON_MS = 10 * 60_000;
/** At most this many held runs per instance (a Map entry each); past it, parks are not held. */
const HOLD_MAX = 10_000;

/**
 * Keeps one timer on the nearest `wakeAt` (never a per-second poll). When it
 * fires, claims the due sleepers in batches — any instance may win a run, and
 * the store guarantees one winner — and resumes them.
 *
 * Runs this instance parked itself (due within HOLD_HORIZON_MS) are also
 * *held*: the timer knows their ids, so when it fires for one of them the
 * scheduler claims just those runs by id (`claimDueRuns({ runIds })`, a
 * primary-key statement on postgres) instead of scanning the deadline
 * indexes. The claim is the same fenced claim — any other instance may still
 * take the run first, and then this one gets nothing — so holding changes
 * which statement wakes a run, never who may. The deadline stays in the
 * store; a hold is only a hint and dies with the process.
 */
export class WakeScheduler {
  private running = false;
  /** Runs this instance parked and will claim by id when due: run id → wakeAt. */
  private readonly held = new Map<string, number>();
  /**
   * A scan of the store's due runs is wanted: set by every outside poke (store events, freed permits,
   * start) and by a timer that fired for no held run; a timer fired for held runs claims those alone.
   */
  private scanWanted = true;
  /** A store event said a wake time may have moved: read the next deadline, and scan only if one is due. */
  private recheckWanted = false;
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
      if (e.kind === "wake") this.recheck();
    });
    this.poke();
  }

  /**
   * Remembers that this instance parked `runId` until `wakeAt`, so the wake
   * claims it by id. Called once the park committed.
   */
  hold(runId: string, wakeAt: number): void {
    if (!this.running) return;
    if (wakeAt - this.o.clock.now() > HOLD_HORIZON_MS) return;
    if (this.held.size >= HOLD_MAX && !this.held.has(runId)) return;
    this.held.set(runId, wakeAt);
    this.armAt(wakeAt);
  }

  /** A wake time may have moved: re-arm (or run now). */
  poke(): void {
    this.scanWanted = true;
    this.wake();
  }

  /**
   * A store event (a park, a wake early, a released run, a poll tick, a
   * reconnect): most of these move a deadline into the future, so the next
   * deadline is read first (nextWakeAt) and the due runs are scanned only if
   * it has come — one statement per event instead of a claim and a re-arm.
   */
  private recheck(): void {
    this.recheckWanted = true;
    this.wake();
  }

  /** The timer fired: held runs due now are claimed by id; with none, the store's due runs are scanned. */
  private fire(): void {
    const now = this.o.clock.now();
    let heldDue = false;
    for (const at of this.held.values()) if (at <= now) heldDue = true;
    if (!heldDue) this.scanWanted = true;
    this.wake();
  }

  private wake(): void {
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
    // A claim ran in this round: the next deadline is read again at the end.
    let claimed = false;
    try {
      do {
        this.again = false;
        starved = false;
        const held = this.takeHeldDue();
        if (held.length > 0) {
          claimed = true;
          starved = await this.claimHeld(held, batch);
        }
        if (this.recheckWanted && !this.scanWanted && !starved) {
          this.recheckWanted = false;
          const next = await this.o.store.nextWakeAt({ flows: this.o.flows });
          if (next !== null && next <= this.o.clock.now()) this.scanWanted = true;
          else if (next !== null && this.running) this.armAt(next);
        }
        if (!this.scanWanted || starved) continue;
        this.scanWanted = false;
        this.recheckWanted = false;
        claimed = true;
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
      // A timer that claimed held runs only: the re-arm's nextWakeAt shows whether another run is due
      // now (then the timer fires at once and scans).
      if (!starved && claimed) await this.arm();
    } catch (e) {
      this.o.logger.error({ err: e }, "wake scheduler: claim failed; retrying in 1 s");
      this.armAt(this.o.clock.now() + 1_000);
    } finally {
      this.ticking = false;
      if (this.again && this.running) this.wake();
    }
  }

  /** Held runs due now, removed from the holds (claimed next, or left to the scan). */
  private takeHeldDue(): string[] {
    const now = this.o.clock.now();
    const due: string[] = [];
    for (const [id, at] of this.held) if (at <= now) due.push(id);
    for (const id of due) this.held.delete(id);
    return due;
  }

  /**
   * One fenced claim of held runs by id. Returns true when no permit was free
   * (the runs stay due in the store; a freed permit pokes a scan, which takes them).
   */
  private async claimHeld(ids: string[], batch: number): Promise<boolean> {
    const max = this.o.permits.tryTake(Math.min(ids.length, batch));
    // What this claim cannot take is left to a scan of the store.
    if (max < ids.length) this.scanWanted = true;
    if (max === 0) return true;
    let due: AcquiredRun[];
    try {
      due = await this.o.store.claimDueRuns({
        owner: this.o.nextOwner(),
        now: this.o.clock.now(),
        max,
        leaseMs: this.o.leaseMs,
        flows: this.o.flows,
        runIds: ids,
      });
    } catch (e) {
      this.o.permits.giveBack(max);
      this.scanWanted = true;
      throw e;
    }
    if (due.length < max) this.o.permits.giveBack(max - due.length);
    for (const run of due) this.track(run);
    return false;
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
      this.fire();
    });
  }

  async stop(timeoutMs: number): Promise<void> {
    this.running = false;
    this.held.clear();
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
