/** The wake scheduler: one timer on the earliest journal deadline, then claims due runs and resumes them. */
import type { Clock } from "../clock/clock.ts";
import type { Logger } from "../log/logger.ts";
import { loopFailureLog } from "../store/store-health.ts";
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
  /**
   * How long before a sleeper's `wakeAt` (app-clock ms) the scheduler claims it, then holds the
   * lease and resumes the run at its `wakeAt` from a local timer, so the claim's commit is off the
   * wake's path. 0 (default): claimed when due. Leases of running runs are never taken early.
   */
  lookaheadMs?: number;
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
 *
 * With `lookaheadMs` (L > 0; the postgres driver's `wakeLookaheadMs`), every
 * claim also takes sleepers due within L (`sleepersDueBy`) and the timer fires
 * L early: a sleeper claimed before its `wakeAt` is *reserved* — its lease is
 * taken, the store still reads it sleeping — and waits here, lease and permit
 * held, on a local timer at its `dueAt`; then `resume` runs it (the runtime
 * sends the claim that sets it running, not awaited before the replay).
 * `wakeNow` resumes a reserved run at once (wake early here), and a stop
 * releases its reservation (still sleeping; a wake event tells the others).
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
  /** Reserved runs waiting for their dueAt: lease and permit held, a local timer each. */
  private readonly waiting = new Map<string, { run: AcquiredRun; cancel: () => void }>();
  private round: Promise<void> = Promise.resolve();

  /** A failed claim's log line: once per store outage at warn, else error (store-health.ts). */
  private readonly claimFailed: ReturnType<typeof loopFailureLog>;

  constructor(private readonly o: WakeSchedulerOptions) {
    this.claimFailed = loopFailureLog(o.store, o.logger);
  }

  get active(): number {
    return this.resuming.size;
  }

  private get lookahead(): number {
    return Math.max(0, this.o.lookaheadMs ?? 0);
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
    this.armAt(wakeAt - this.lookahead);
  }

  /**
   * Wake early of a run this instance reserved (another instance's claim could not take it before
   * its reservation lapses): resumes it now. False when the run is not waiting here.
   */
  wakeNow(runId: string): boolean {
    const w = this.waiting.get(runId);
    if (w === undefined) return false;
    this.waiting.delete(runId);
    w.cancel();
    this.track(w.run);
    return true;
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

  /** The timer fired: held runs due (within the lookahead) are claimed by id; with none, the store's due runs are scanned. */
  private fire(): void {
    if (!this.heldDue()) this.scanWanted = true;
    this.wake();
  }

  /** A held run is due within the lookahead. */
  private heldDue(): boolean {
    const by = this.o.clock.now() + this.lookahead;
    for (const at of this.held.values()) if (at <= by) return true;
    return false;
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
    // A scan of the store's due runs ran in this round (see arm).
    let scanned = false;
    try {
      do {
        this.again = false;
        starved = false;
        const held = this.takeHeldDue();
        if (held.length > 0 && this.running) {
          claimed = true;
          starved = await this.claimHeld(held, batch);
        }
        if (this.recheckWanted && !this.scanWanted && !starved) {
          this.recheckWanted = false;
          const next = await this.o.store.nextWakeAt({ flows: this.o.flows });
          if (next !== null && next - this.lookahead <= this.o.clock.now()) {
            // A deadline within the lookahead: scan, unless it is a run held here (its claim by id takes it).
            if (!this.isHeldAt(next)) this.scanWanted = true;
            else this.again = true;
          } else if (next !== null && this.running) this.armAt(next - this.lookahead);
        }
        if (!this.scanWanted || starved) continue;
        this.scanWanted = false;
        this.recheckWanted = false;
        claimed = true;
        scanned = true;
        for (;;) {
          // Stopped while this round awaited the store: no claim goes out after stop (time may have
          // moved on since, and a claim now would take runs due later than the stop).
          if (!this.running) break;
          const max = this.o.permits.tryTake(batch);
          if (max === 0) {
            starved = true;
            break;
          }
          let due: AcquiredRun[];
          try {
            const now = this.o.clock.now();
            due = await this.o.store.claimDueRuns({
              owner: this.o.nextOwner(),
              now,
              max,
              leaseMs: this.o.leaseMs,
              flows: this.o.flows,
              ...(this.lookahead > 0 ? { sleepersDueBy: now + this.lookahead } : {}),
            });
          } catch (e) {
            this.o.permits.giveBack(max);
            throw e;
          }
          if (due.length < max) this.o.permits.giveBack(max - due.length);
          for (const run of due) this.begin(run);
          if (due.length < max || !this.running) break;
        }
      } while (this.again && this.running);
      // A timer that claimed held runs only: the re-arm's nextWakeAt shows whether another run is due
      // now (then the timer fires at once and scans).
      if (!starved && claimed) await this.arm(scanned);
    } catch (e) {
      this.claimFailed(e, {}, "wake scheduler: claim failed; retrying in 1 s");
      this.armAt(this.o.clock.now() + 1_000);
    } finally {
      this.ticking = false;
      if (this.again && this.running) this.wake();
    }
  }

  /** Held runs due within the lookahead, removed from the holds (claimed next, or left to the scan). */
  private takeHeldDue(): string[] {
    const by = this.o.clock.now() + this.lookahead;
    const due: string[] = [];
    for (const [id, at] of this.held) if (at <= by) due.push(id);
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
      const now = this.o.clock.now();
      due = await this.o.store.claimDueRuns({
        owner: this.o.nextOwner(),
        now,
        max,
        leaseMs: this.o.leaseMs,
        flows: this.o.flows,
        runIds: ids,
        ...(this.lookahead > 0 ? { sleepersDueBy: now + this.lookahead } : {}),
      });
    } catch (e) {
      this.o.permits.giveBack(max);
      this.scanWanted = true;
      throw e;
    }
    if (due.length < max) this.o.permits.giveBack(max - due.length);
    for (const run of due) this.begin(run);
    return false;
  }

  /**
   * A run a claim just took: resumed now, or — reserved ahead of its wake time — at its dueAt. A
   * claim that answers after stop gives its runs back instead: nothing ran, so the next taker counts
   * no recovery, and no run starts after the app said it stopped.
   */
  private begin(run: AcquiredRun): void {
    if (!this.running) {
      const p = this.release(run).finally(() => this.resuming.delete(p));
      this.resuming.add(p);
      return;
    }
    const at = run.dueAt;
    if (at === undefined || at <= this.o.clock.now()) {
      this.track(run);
      return;
    }
    const id = run.run.id;
    const cancel = this.o.clock.at(at, () => {
      if (this.waiting.get(id)?.run !== run) return;
      this.waiting.delete(id);
      this.track(run);
    });
    this.waiting.set(id, { run, cancel });
  }

  /** `at` is the wake time of a run held here. */
  private isHeldAt(at: number): boolean {
    for (const v of this.held.values()) if (v === at) return true;
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

  /**
   * Re-arms on the store's next deadline, `lookaheadMs` early. A deadline already inside the
   * lookahead that this round did not take is a held run (claimed next round, by id), a sleeper a
   * scan has not looked at yet (`scanned` false: scan once), or one a scan could not take early — a
   * live lease lapsing then, or a run another instance is claiming: the timer waits for the deadline
   * itself, so such a deadline never spins the scheduler.
   */
  private async arm(scanned: boolean): Promise<void> {
    const next = await this.o.store.nextWakeAt({ flows: this.o.flows });
    if (next === null || !this.running) return;
    const early = next - this.lookahead;
    if (this.lookahead === 0 || early > this.o.clock.now()) {
      this.armAt(early);
      return;
    }
    if (this.heldDue()) this.again = true;
    else if (!scanned) {
      this.scanWanted = true;
      this.again = true;
    } else this.armAt(next);
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

  /**
   * Stops claiming; reserved runs are released (still sleeping: any instance's scheduler takes them
   * at their wakeAt; a failed release leaves them to their lease lapsing); then waits up to
   * `timeoutMs` for the resumes running.
   */
  async stop(timeoutMs: number): Promise<void> {
    this.running = false;
    this.held.clear();
    this.unsubscribe?.();
    this.cancel?.();
    this.cancel = undefined;
    const released = [...this.waiting.values()].map(({ run, cancel }) => {
      cancel();
      return this.release(run);
    });
    this.waiting.clear();
    let timer: NodeJS.Timeout | undefined;
    // The claim round in flight first: a claim answering now gives its runs back (begin), and
    // those releases join `resuming`, which is read after it.
    const settled = this.round.then(() => Promise.allSettled([...this.resuming, ...released]));
    await Promise.race([
      settled,
      new Promise<void>((r) => {
        timer = setTimeout(r, timeoutMs);
        timer.unref();
      }),
    ]);
    clearTimeout(timer);
  }

  /**
   * Gives a claimed run back and frees its permit: a reserved sleeper stays sleeping with its
   * wakeAt; a run the claim set running is due again at once. The retry time is its due time, so
   * the release is a store wake event: every instance's scheduler re-reads the deadline and
   * whichever claims first takes it. Nothing ran, so the taker counts no recovery; a sleeper is no
   * boot orphan to be run early.
   */
  private async release(run: AcquiredRun): Promise<void> {
    const now = this.o.clock.now();
    try {
      await this.o.store.releaseRun({
        runId: run.run.id,
        owner: run.run.leaseOwner!,
        now,
        retryAt: run.dueAt ?? now,
      });
    } catch (e) {
      this.o.logger.warn(
        { err: e, runId: run.run.id },
        "wake scheduler: giving a claimed run back at stop failed; it is taken again when its lease lapses",
      );
    } finally {
      this.o.permits.giveBack(1);
    }
  }
}
