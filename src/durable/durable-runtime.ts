/** The lifecycle of durable runs inside one app: start, deliver, resume, orphan scan, wake scheduler, wake early. */
import type { Clock } from "../clock/clock.ts";
import { ClockResourceNotFoundError, errorRecord, JournalLeaseBusy, OkeError } from "../errors.ts";
import type { AnyFlow, InvokeResult } from "../flow/flow.ts";
import type { Logger } from "../log/logger.ts";
import type { AcquiredRun, ClaimedMessage, RunRecord, Store, StoredMessage } from "../store/types.ts";
import { retryAfterFailure, unlimitedAbort } from "../store/commit-retry.ts";
import { releaseRetried, retryJournalWrite } from "./journal-retry.ts";
import { leaseExpiredFailure } from "../signal/attempt-budget.ts";
import type { OnceSignal } from "../signal/signal.ts";
import { Permits } from "./permits.ts";
import { consumerRunId, replayOf } from "../store/resettle-rules.ts";
import { markWithin, STOP_MARK_TIMEOUT_MS } from "../store/stop-mark.ts";
import { isStoppedOwner, stoppedOwner } from "../store/wake-rules.ts";
import { RECOVERIES_EXCEEDED, recoveriesExceeded, TakeoverLog } from "./recoveries.ts";
import { TERMINATED } from "./terminate.ts";
import { MismatchLog, UNKNOWN_FLOW_RETRY_MS, unknownFlowHold } from "./mismatch-log.ts";
import { driveRun, type DurableDeps, type UndoList } from "./runner.ts";
import type { JournalSession } from "./session.ts";
import { restoreFailure } from "./step-errors.ts";
import { WakeScheduler } from "./wake-scheduler.ts";

/** Orphan scan page size. */
const ORPHAN_PAGE = 500;

export interface WakeEarlyResult {
  outcome: "resumed" | "wake time only";
  runId: string;
}

/**
 * What one delivery of a message to a durable consumer came to (the worker pool settles it). A
 * `final` error settles the message for good (dead) with attempts left: its run ended for good.
 */
export type DurableDelivery =
  | { kind: "ok" }
  | { kind: "error"; failure: { code: string; message: string }; final?: boolean }
  | { kind: "abandon"; runId: string };

/** The frame one attempt of a durable flow body runs in. */
export interface DurableFrame {
  runId: string;
  attempt: number;
  parentRunId: string | null;
  session: JournalSession;
  undos: UndoList;
}

export interface DurableRuntimeOptions {
  store: Store;
  clock: Clock;
  logger: Logger;
  /** Unique per app instance; lease owners are `<instanceId>/<n>`. */
  instanceId: string;
  leaseMs: number;
  /** Resumes running at once (`durable.concurrency`); new starts are bounded by their callers. */
  concurrency: number;
  /**
   * Recoveries a run may have (`durable.maxRecoveries`): a run taken over more often than this after
   * its lease lapsed is ended from its journal, failed with OKE1303. Default: unbounded.
   */
  maxRecoveries?: number;
  /** The flows this app has, by name (a run of any other flow is left for another instance). */
  flows: ReadonlyMap<string, AnyFlow>;
  /** Runs one attempt of a flow body inside its journal session (the app wires it to fx). */
  execute(flow: AnyFlow, input: unknown, frame: DurableFrame): Promise<unknown>;
  /**
   * The once signal each durable consumer flow takes its messages from, by flow name (its runs' ids
   * are message ids): a run whose message spent its attempts is ended, not resumed (see `consumerLook`).
   */
  consumers?: ReadonlyMap<string, Consumer>;
}

/** What the runtime knows of a durable consumer's signal (DurableRuntimeOptions.consumers). */
export type Consumer = Pick<OnceSignal, "name" | "retries"> & { deadLetter?: boolean };

/**
 * A durable consumer's run resumed after the park that settled its message `delivered` (its message
 * still so): a failure from here on settles the message again (resettleDelivered), see `resume`.
 */
interface ParkedDelivery {
  consumer: Consumer;
  message: StoredMessage;
}

/** DurableRuntimeOptions.consumers from an app's signals and their subscribers: durable flows bound to once signals. */
export function durableConsumers(
  signals: ReadonlyMap<string, { readonly delivery: string }>,
  subscribers: ReadonlyMap<string, readonly AnyFlow[]>,
): Map<string, Consumer> {
  const out = new Map<string, Consumer>();
  for (const [name, flows] of subscribers) {
    const s = signals.get(name);
    if (s?.delivery !== "once") continue;
    const { retries, deadLetter } = s as OnceSignal;
    for (const f of flows) if (f.durable && f.name) out.set(f.name, { name, retries, deadLetter });
  }
  return out;
}

/** A take refused because the run ended (OKE1310, terminal) or was deleted (OKE1311) since it was listed. */
const goneSinceListed = (e: unknown): boolean =>
  e instanceof OkeError && (e.code === "OKE1310" || e.code === "OKE1311");

/**
 * Owns every durable run this instance drives. Every path that starts or
 * continues a run — a start, a consumer's delivery, the boot orphan scan, the
 * wake scheduler, wake early — goes through here and through one `driveRun`.
 */
export class DurableRuntime {
  private acquisitions = 0;
  private readonly deps: DurableDeps;
  private readonly scheduler: WakeScheduler;
  private readonly permits: Permits;
  /** Runs a wake early is working on, and whether a resume of each started here meanwhile. */
  private readonly wakeWatch = new Map<string, boolean>();
  /** Resumes started by the orphan scan and wake early (the scheduler tracks its own). */
  private readonly tasks = new Set<Promise<unknown>>();
  /**
   * Attempts of durable runs this instance is driving now (every path): the run id, the owner it was
   * taken as, and its session once the body runs (a stop deadline renames a lease it leaves).
   */
  private readonly driving = new Map<
    Promise<unknown>,
    { runId: string; owner: string | null; session?: JournalSession }
  >();
  /** The info line of each run taken over from a lapsed lease (a recovery). */
  private readonly takeovers: TakeoverLog;
  /** The session of each run's attempt driven here now: a call waiting for its child checks its lease. */
  private readonly sessions = new Map<string, JournalSession>();
  /** Calls waiting for a child run another holder has, by the child's id: woken when an attempt of it ends here. */
  private readonly attemptEnds = new Map<string, Set<() => void>>();
  /** Deliveries of a consumer's message in progress here, by run id (see `attemptHereEnds`). */
  private readonly delivering = new Map<string, number>();
  /** Aborted at the stop deadline: journal writes still retrying through an outage give up. */
  private readonly stopping = unlimitedAbort();
  /**
   * The durable flows this instance runs: every claim, orphan scan and wake
   * timer is filtered to them, so a run of another flow keeps its status and
   * `wakeAt` until an instance that has its flow takes it.
   */
  readonly durableFlows: readonly string[];

  constructor(private readonly o: DurableRuntimeOptions) {
    this.takeovers = new TakeoverLog(o.logger, o.maxRecoveries);
    this.durableFlows = [...o.flows.entries()].filter(([, f]) => f.durable).map(([name]) => name);
    this.deps = {
      store: o.store,
      clock: o.clock,
      logger: o.logger,
      nextOwner: () => this.nextOwner(),
      leaseMs: o.leaseMs,
      abort: this.stopping.signal,
      mismatches: new MismatchLog(o.logger),
    };
    this.permits = new Permits(o.concurrency, () => this.scheduler.poke());
    this.scheduler = new WakeScheduler({
      store: o.store,
      clock: o.clock,
      logger: o.logger,
      nextOwner: () => this.nextOwner(),
      leaseMs: o.leaseMs,
      permits: this.permits,
      flows: this.durableFlows,
      resume: (acquired) => this.resumeHeld(acquired).then(() => undefined),
      lookaheadMs: o.store.wakeLookaheadMs ?? 0,
    });
  }

  /** Durable runs this instance is driving right now: the stop line reports those a stop left behind. */
  get running(): number {
    return this.driving.size;
  }

  /** Ids of the durable runs this instance is driving right now (what a stop leaves behind). */
  runningIds(): string[] {
    return [...this.driving.values()].map((d) => d.runId);
  }

  /**
   * driveRun, counted in `running` while it drives; stop() waits for it. A run
   * it parked is held by this instance's scheduler, which claims it by id when due.
   */
  private drive(...args: Parameters<typeof driveRun>): ReturnType<typeof driveRun> {
    const [, acquired, , options] = args;
    if (acquired.recoveredFrom !== undefined) this.takeovers.note(acquired.run, acquired.recoveredFrom);
    // Every path that takes a run over comes through here: past the bound it only replays and fails.
    const poison =
      options?.end === undefined
        ? recoveriesExceeded(acquired.run, this.o.maxRecoveries ?? Infinity)
        : undefined;
    if (poison !== undefined) {
      const { id, flow, status, recoveries } = acquired.run;
      const at = { runId: id, flow, recoveries, maxRecoveries: this.o.maxRecoveries, code: poison.code };
      // Once: the run ends now. A compensating run already failed: its undos only finish, and they
      // are not bounded (skipping one would lose it), so each such recovery is said, as what it is.
      if (status !== "compensating") this.o.logger.error(at, poison.message);
      else
        this.o.logger.error(
          at,
          `durable run "${id}" (${flow}) is compensating and was recovered ${recoveries} times, more than durable.maxRecoveries (${this.o.maxRecoveries}): one of its undos may be killing its process; they run again`,
        );
      args[3] = { ...options, end: poison };
    }
    const runId = acquired.run.id;
    const execute = args[2];
    let session: JournalSession | undefined;
    const entry: { runId: string; owner: string | null; session?: JournalSession } = {
      runId,
      owner: acquired.run.leaseOwner,
    };
    args[2] = (s, undos) => {
      session = s;
      entry.session = s;
      this.sessions.set(runId, s);
      return execute(s, undos);
    };
    const p = driveRun(...args);
    const settled = p.then(
      (outcome) => {
        // A run held back by a journal mismatch is not held here: this instance may be the one on the
        // other version, and any instance's scheduler should get the next try.
        if (outcome.kind === "parked" && outcome.blocked === undefined)
          this.scheduler.hold(outcome.runId, outcome.wakeAt);
      },
      () => undefined,
    );
    this.driving.set(settled, entry);
    void settled.then(() => {
      this.driving.delete(settled);
      if (session !== undefined && this.sessions.get(runId) === session) this.sessions.delete(runId);
      // Calls waiting for this run (a parent that found it held here) look again: it may have ended.
      const waiters = this.attemptEnds.get(runId);
      this.attemptEnds.delete(runId);
      for (const wake of waiters ?? []) wake();
    });
    return p;
  }

  /** A fresh lease-holder token per acquisition, so two code paths of one process never share a lease. */
  nextOwner(): string {
    return `${this.o.instanceId}/${++this.acquisitions}`;
  }

  /** Starts a run of `flow` and drives it until it returns, parks or fails (thrown). */
  async start(
    flow: AnyFlow,
    input: unknown,
    parentRunId: string | null,
    runId: string,
  ): Promise<InvokeResult> {
    if (parentRunId !== null) return this.startChild(flow, input, parentRunId, runId);
    const acquired = await this.startOrOutcome(flow, input, parentRunId, runId);
    return "run" in acquired ? this.driveStarted(flow, input, parentRunId, acquired) : acquired;
  }

  /**
   * A call's child run (fx.call; its id derived from the caller's, so a replay names the same run):
   * an existing run's outcome is taken — returned, thrown, parked — and one still to drive is driven
   * here. One that another holder has right now (after a crash, this instance's orphan scan or
   * scheduler resumed it, or another instance did) is waited for, not failed: failing the call with
   * JournalLeaseBusy ended the parent's attempt with its lease held, so it was taken over again a
   * lease later — a second recovery for one crash (durable.maxRecoveries 1 failed it). The
   * wait wakes when an attempt of the child driven here ends; for another instance's (no store event
   * says a run ended elsewhere) it looks again every third of a lease, and when the child's lease
   * lapses (its holder died too) takes the child over itself. The child runs under one holder at a
   * time throughout: each take is the store's.
   */
  private async startChild(
    flow: AnyFlow,
    input: unknown,
    parentRunId: string,
    runId: string,
  ): Promise<InvokeResult> {
    const { store, clock, leaseMs } = this.o;
    const every = Math.max(1, Math.floor(leaseMs / 3));
    for (let waited = false; ; waited = true) {
      // The parent's run must still be ours (its heartbeat ran while it waited): else it ends here.
      if (waited) await this.sessions.get(parentRunId)?.ensureLease();
      const ended = this.attemptEnd(runId);
      try {
        const existing = await store.getRun(runId);
        const outcome = existing === undefined ? undefined : outcomeOf(runId, flow, existing);
        if (outcome !== undefined) return outcome;
        let acquired: AcquiredRun | InvokeResult;
        try {
          acquired = await this.startOrOutcome(flow, input, parentRunId, runId);
        } catch (e) {
          if (!(e instanceof JournalLeaseBusy && e.runId === runId)) throw e;
          const now = clock.now();
          const lapses = existing?.leaseExpiresAt ?? 0;
          if (!waited)
            this.o.logger.info(
              { runId: parentRunId, child: runId },
              "durable run: its call's child run is held by another attempt; waiting for it to end",
            );
          await this.waitForChild(ended.promise, lapses > now ? Math.min(lapses, now + every) : now + every);
          if (this.stopping.signal.aborted) {
            this.o.logger.warn(
              { runId: parentRunId, child: runId },
              "durable run: stop deadline reached while its call waited for the child run; left to its lease",
            );
            throw new JournalLeaseBusy(parentRunId);
          }
          continue;
        }
        return "run" in acquired ? await this.driveStarted(flow, input, parentRunId, acquired) : acquired;
      } finally {
        ended.cancel();
      }
    }
  }

  /** A promise that resolves when an attempt of `runId` driven here ends (register before looking). */
  private attemptEnd(runId: string): { promise: Promise<void>; cancel(): void } {
    let wake!: () => void;
    const promise = new Promise<void>((r) => (wake = r));
    let waiters = this.attemptEnds.get(runId);
    if (waiters === undefined) this.attemptEnds.set(runId, (waiters = new Set()));
    const mine = waiters;
    mine.add(wake);
    return {
      promise,
      cancel: () => {
        mine.delete(wake);
        if (mine.size === 0 && this.attemptEnds.get(runId) === mine) this.attemptEnds.delete(runId);
      },
    };
  }

  /** Until `ended` resolves, the app clock reaches `at`, or the stop deadline passes. */
  private waitForChild(ended: Promise<void>, at: number): Promise<void> {
    const stopping = this.stopping.signal;
    return new Promise<void>((resolve) => {
      if (stopping.aborted) return resolve();
      // Each may run more than once: cancelling, removing and resolving again change nothing.
      const finish = (): void => {
        cancel();
        stopping.removeEventListener("abort", finish);
        resolve();
      };
      // Clock.at and then() call back on a later tick, never inside this one (cancel is set by then).
      const cancel = this.o.clock.at(at, finish);
      stopping.addEventListener("abort", finish);
      void ended.then(finish);
    });
  }

  /**
   * Creates run `runId` holding its lease, or takes an existing one (JournalLeaseBusy while another
   * holder's lease is live). A run that ended since it was read comes back as its outcome.
   */
  private async startOrOutcome(
    flow: AnyFlow,
    input: unknown,
    parentRunId: string | null,
    runId: string,
  ): Promise<AcquiredRun | InvokeResult> {
    try {
      return await this.o.store.startRun({
        id: runId,
        flow: flow.name!,
        input,
        parentRunId,
        owner: this.nextOwner(),
        now: this.o.clock.now(),
        leaseMs: this.o.leaseMs,
      });
    } catch (e) {
      // A run id chosen earlier (an Idempotency-Key retry taking over a dead request's run, a call's
      // child) whose run ended since it was read — finished by another holder: its outcome, not a 409.
      if (!(e instanceof OkeError && e.code === "OKE1310")) throw e;
      const run = await this.o.store.getRun(runId);
      const outcome = run === undefined ? undefined : outcomeOf(runId, flow, run);
      if (outcome === undefined) throw e;
      return outcome;
    }
  }

  /** Drives a run `start` just took until it returns, parks or fails (thrown). */
  private async driveStarted(
    flow: AnyFlow,
    input: unknown,
    parentRunId: string | null,
    acquired: AcquiredRun,
  ): Promise<InvokeResult> {
    const runId = acquired.run.id;
    const outcome = await this.drive(this.deps, acquired, (session, undos) =>
      this.o.execute(flow, input, { runId, attempt: 1, parentRunId, session, undos }),
    );
    if (outcome.kind === "failed") throw outcome.error;
    return outcome.kind === "parked" ? { kind: "parked", runId } : { kind: "returned", value: outcome.value };
  }

  /**
   * One delivery of a once message to a durable consumer. The run id is the
   * message id, so a redelivery resumes the same run — until that run failed
   * and an operator replayed the message: the replay runs afresh (see
   * `currentRun`). While the message has attempts left (`retryable`), a
   * failing step is not journaled.
   */
  async deliver(flow: AnyFlow, m: ClaimedMessage, retryable: boolean): Promise<DurableDelivery> {
    return this.deliverTo(flow, m, retryable, false);
  }

  /** `deliver`; `waited`: this delivery already waited once for an attempt of the run driven here. */
  private async deliverTo(
    flow: AnyFlow,
    m: ClaimedMessage,
    retryable: boolean,
    waited: boolean,
  ): Promise<DurableDelivery> {
    const { clock } = this.o;
    try {
      const { runId, run: existing } = await this.currentRun(m.id);
      if (existing !== undefined && existing.flow !== flow.name)
        return { kind: "error", failure: errorRecord(foreignRun(runId, flow, existing)) };
      if (existing?.status === "completed") return { kind: "ok" };
      if (existing?.status === "failed") return failedDelivery(existing);
      // Parked: the wake scheduler owns it now; the message's job is done.
      if (existing?.status === "sleeping" && (existing.wakeAt ?? 0) > clock.now()) return { kind: "ok" };
      // A redelivery continues a run: it counts against durable.concurrency like every resume.
      if (existing === undefined) return await this.deliverOnce(flow, m, retryable, runId);
      await this.permits.take();
      try {
        return await this.deliverOnce(flow, m, retryable, runId);
      } finally {
        this.permits.release();
      }
    } catch (e) {
      if (e instanceof JournalLeaseBusy) {
        // Held by an attempt this instance drives (its orphan scan or wake scheduler took the run
        // over after a crash, or an earlier delivery outlived the message's lease): the message
        // settles with that attempt's outcome instead of being left to its lease, which spent one
        // more attempt per crash (the next claim, a lease later, was the one that settled it).
        if (!waited && (await this.attemptHereEnds(e.runId, m)))
          return this.deliverTo(flow, m, retryable, true);
        // Another instance holds the run: leave the message to its lease.
        return { kind: "abandon", runId: e.runId };
      }
      // Ended meanwhile by another holder (a resume elsewhere completed or failed it between the read
      // above and this attempt's take): the message settles with what the run ended as — not with the
      // race's OKE1310, which on the last attempt dead-lettered the message of a completed run.
      if (e instanceof OkeError && e.code === "OKE1310") {
        const { run } = await this.currentRun(m.id);
        if (run?.status === "completed") return { kind: "ok" };
        if (run?.status === "failed") return failedDelivery(run);
      }
      return { kind: "error", failure: errorRecord(e) };
    }
  }

  /**
   * True once an attempt of run `runId` this instance holds has ended, when that attempt is not a
   * delivery (the orphan scan, the wake scheduler, a wake early): one it drives, or one whose take
   * has not reached its body yet (the lease is under this instance's id: the orphan scan reads the
   * message before it drives the run); true at once when nobody holds the run any more (that attempt
   * ended before this looked). False at once when another instance holds the run or a delivery here
   * does, and when the attempt still runs as the message's lease lapses (or the app stops): then the
   * message is left to its lease, as for a run held elsewhere.
   */
  private async attemptHereEnds(runId: string, m: ClaimedMessage): Promise<boolean> {
    const ended = this.attemptEnd(runId);
    try {
      // An earlier delivery of this message, here, outlived the message's lease: left to its lease
      // as ever (each such claim is an attempt the slow run uses up; see signals.md).
      if (this.delivering.has(runId)) return false;
      const driving = (): boolean => [...this.driving.values()].some((d) => d.runId === runId);
      if (!driving()) {
        const owner = (await this.o.store.getRun(runId))?.leaseOwner ?? null;
        // Let go since the take was refused (that attempt ended): look again now.
        if (owner === null) return !this.stopping.signal.aborted;
        if (!owner.startsWith(`${this.o.instanceId}/`) || isStoppedOwner(owner)) return false;
      }
      this.o.logger.debug(
        { signal: m.signal, messageId: m.id, attempt: m.attempts, runId },
        "durable delivery: its run is held by another attempt in this instance; waiting for it to end",
      );
      await this.waitForChild(ended.promise, m.leaseExpiresAt);
      return !driving() && !this.stopping.signal.aborted;
    } finally {
      ended.cancel();
    }
  }

  /**
   * A claim of a consumer's message past its attempt budget (every attempt so far crashed, hung, or
   * found the run held by another instance). The message settles with its run: completed or parked →
   * delivered, failed → its failure; a run another instance holds right now (live lease) → the message
   * is left to its lease and settles once the run is over; a run released by an attempt that reported
   * a retryable failure → this claim is the last attempt. `undefined` (no run, or its holder died with
   * the lease) → the caller dead-letters with LEASE_EXPIRED, so a handler that crashes its process
   * still stops after retries + 1.
   *
   * `unstarted`: instead, this claim held the last attempt and was dropped from the worker pool's
   * buffer unrun (its lease ran out before a slot freed up). The run, if an earlier attempt started
   * one, decides the same way, except that nothing runs late: a released run, like one whose holder
   * died, is ended from its journal with `unstarted` (the failure saying this attempt never started),
   * and `undefined` (no run) settles the message with it.
   */
  async deliverSpent(
    flow: AnyFlow,
    m: ClaimedMessage,
    unstarted?: { code: string; message: string },
  ): Promise<DurableDelivery | undefined> {
    const { runId, run } = await this.currentRun(m.id);
    if (run === undefined) return undefined;
    if (run.flow !== flow.name) return { kind: "error", failure: errorRecord(foreignRun(runId, flow, run)) };
    if (run.status === "completed" || run.status === "sleeping") return { kind: "ok" };
    // Also a run ended for a spent budget (here or by a resume): the message gets its LEASE_EXPIRED failure.
    if (run.status === "failed")
      return { kind: "error", failure: run.error ?? { code: "Error", message: "run failed" } };
    if (run.leaseOwner !== null && (run.leaseExpiresAt ?? 0) > this.o.clock.now())
      return { kind: "abandon", runId };
    if (run.leaseOwner === null && unstarted === undefined) return this.deliver(flow, m, false);
    return this.endSpent(flow, m, runId, unstarted);
  }

  /**
   * The run a delivery of message `messageId` belongs to. It is the message's own id, unless that
   * run failed and an operator replayed the message since: the n-th replay runs as `<id>.r<n>`
   * (`consumerRunId`), a fresh journal, while the failed run stays for inspection. Deterministic, so
   * every redelivery of that replay resumes the same run. Costs a message read only when the
   * message's own run failed.
   */
  private async currentRun(messageId: string): Promise<{ runId: string; run: RunRecord | undefined }> {
    const base = await this.o.store.getRun(messageId);
    if (base?.status !== "failed") return { runId: messageId, run: base };
    const replays = (await this.o.store.getMessage(messageId))?.replays ?? 0;
    if (replays === 0) return { runId: messageId, run: base };
    const runId = consumerRunId({ id: messageId, replays });
    return { runId, run: await this.o.store.getRun(runId) };
  }

  /**
   * The run of a spent message whose holder died with its lease: it must not run its body a
   * (retries + 2)th time, nor be left for a resume to complete beside a dead letter. It is taken
   * and ended from its journal (driveRun's `end`): failed with the LEASE_EXPIRED failure the
   * message gets, its compensation run — or completed, when its journal already holds the whole
   * body. Another holder taking it first leaves the message to its lease.
   */
  private async endSpent(
    flow: AnyFlow,
    m: ClaimedMessage,
    runId: string,
    unstarted: { code: string; message: string } | undefined,
  ): Promise<DurableDelivery | undefined> {
    const consumer = this.o.consumers?.get(flow.name!);
    // The claim's own signal names it; a claim past the budget has attempts = retries + 2.
    const failure =
      unstarted ??
      leaseExpiredFailure({ name: m.signal, retries: consumer?.retries ?? m.attempts - 2 }, m.attempts - 1);
    await this.permits.take();
    try {
      const acquired = await this.o.store.acquireRun({
        runId,
        owner: this.nextOwner(),
        now: this.o.clock.now(),
        leaseMs: this.o.leaseMs,
      });
      const outcome = await this.driveEnded(flow, acquired, failure, "spent claim");
      if (outcome.kind === "completed" || outcome.kind === "parked") return { kind: "ok" };
      return { kind: "error", failure: errorRecord(outcome.error) };
    } catch (e) {
      if (e instanceof JournalLeaseBusy) return { kind: "abandon", runId: e.runId };
      // Ended meanwhile by a resume elsewhere (terminal): settle with what it ended as.
      if (e instanceof OkeError && e.code === "OKE1310") return this.deliverSpent(flow, m, unstarted);
      throw e;
    } finally {
      this.permits.release();
    }
  }

  /** Drives a run to its end from its journal (see driveRun's `end`), logged with who decided it. */
  private driveEnded(
    flow: AnyFlow,
    acquired: AcquiredRun,
    failure: { code: string; message: string },
    via: "spent claim" | "resume",
  ): ReturnType<typeof driveRun> {
    const run = acquired.run;
    this.o.logger.warn(
      { runId: run.id, flow: flow.name, via, code: failure.code },
      "durable run: its message spent every attempt while the run's holder was gone; ending it from its journal (no new work)",
    );
    return this.drive(
      this.deps,
      acquired,
      (session, undos) =>
        this.o.execute(flow, run.input, {
          runId: run.id,
          attempt: 1,
          parentRunId: run.parentRunId,
          session,
          undos,
        }),
      { end: failure },
    );
  }

  /**
   * For a resume (wake scheduler, orphan scan) of a durable consumer's run, what its message says.
   * `ending`: the failure to end it with when its message spent its budget — LEASE_EXPIRED when the
   * message was claimed past the budget, or is on its last attempt with that attempt's lease lapsed
   * (its holder died; this run's lease lapsed too, or we would not hold it); the message's own
   * failure when it is dead already. `parked`: the message is `delivered` — the run parked (this is
   * its wake, or a recovery after it) — so a failure settles it again. Neither: resumed as usual.
   */
  private async consumerLook(
    acquired: AcquiredRun,
  ): Promise<{ ending?: { code: string; message: string }; parked?: ParkedDelivery }> {
    const consumer = this.o.consumers?.get(acquired.run.flow);
    if (consumer === undefined) return {};
    const { messageId, replays } = replayOf(acquired.run.id);
    const m = await this.o.store.getMessage(messageId);
    // No such message (a run of this flow started by a call or an invoke; or one retention pruned,
    // which it does not while the run is unfinished): nothing to settle.
    if (m === undefined || m.signal !== consumer.name) return {};
    // Its message's own last failure (LEASE_EXPIRED when it has none), so the run and it say the same.
    const lastFailure = (): { code: string; message: string } => {
      const last = m.failures.at(-1);
      return last ? { code: last.code, message: last.message } : leaseExpiredFailure(consumer, m.attempts);
    };
    // The run of an earlier replay, never ended, that a later replay superseded (its message runs
    // as a newer `.r<n>` now): ended, not resumed beside it, with the message's last failure.
    if (replays > 0 && replays !== (m.replays ?? 0)) return { ending: lastFailure() };
    if (m.status === "delivered") return { parked: { consumer, message: m } };
    // A run that parked is not ended for its message's state: that was settled when it parked.
    if (acquired.entries.at(-1)?.kind === "sleep") return {};
    // Dead already (the spent claim's lookup failed in an outage, or an older version): the run
    // ends with the message's own last failure.
    if (m.status === "dead") return { ending: lastFailure() };
    const budget = consumer.retries + 1;
    const spent =
      m.status === "inflight" &&
      (m.attempts > budget || (m.attempts === budget && (m.leaseExpiresAt ?? 0) <= this.o.clock.now()));
    return spent ? { ending: leaseExpiredFailure(consumer, Math.min(m.attempts, budget)) } : {};
  }

  /**
   * A durable consumer's run failed after the park that delivered its message. With attempts left
   * (`retry`: the run was released, the failure not journaled) the message goes back to `pending`
   * with the failure, and its next claim resumes the run from its journal — the failed step runs
   * again; on the last attempt (the run failed, its undos ran) it ends `dead` (or `delivered` with
   * the failure, for `deadLetter: false`), a dead letter like any: listed, replayable. Fenced: a
   * message claimed or settled otherwise since is left as it is. Retried through a store outage.
   */
  private async resettleParked(
    parked: ParkedDelivery,
    run: RunRecord,
    error: unknown,
    retry: boolean,
  ): Promise<void> {
    const { store, clock, logger } = this.o;
    if (store.resettleDelivered === undefined) return;
    const { consumer, message: m } = parked;
    const status = retry ? "pending" : consumer.deadLetter === false ? "delivered" : "dead";
    const failure = { ...errorRecord(error), at: clock.now(), attempt: m.attempts };
    const at = { signal: m.signal, messageId: m.id, runId: run.id, attempt: m.attempts, code: failure.code };
    try {
      const done = await retryJournalWrite(this.deps, "settling its message again", run.id, () =>
        store.resettleDelivered!(
          {
            message: {
              id: m.id,
              signal: m.signal,
              key: m.key,
              payload: m.payload,
              parentRunId: m.parentRunId,
            },
            ...(m.replays === undefined ? {} : { replays: m.replays }),
            attempts: m.attempts,
            status,
            failure,
          },
          failure.at,
        ),
      );
      if (!done)
        logger.warn(
          at,
          "durable run: failed after its park, but its message was claimed or settled since; left as it is",
        );
      else if (retry)
        logger.warn(
          at,
          `durable run: failed after its park on attempt ${m.attempts} of ${consumer.retries + 1}; its message is pending again and the retry resumes the run`,
        );
    } catch (err) {
      logger.error(
        { ...at, err },
        `durable run: failed after its park; settling its message ${status} failed, so it stays delivered`,
      );
    }
  }

  /**
   * A delivery's start (or take) of its run, retried while the store says it is unavailable
   * (store.isUnavailable: a killed connection, a restart), with the backoff of journal writes:
   * a transient outage must not cost the message one of its attempts, four killed connections
   * in a row dead-lettered a message whose handler never ran. Safe to repeat: every try takes
   * the run as the same owner, and a start finds the run a lost reply created and takes it again
   * (a take by its own holder). Any other error fails the attempt at once, as before; so does the
   * last outage error once the message's lease (or a run lease) ran out or the app stops.
   */
  private async startThroughOutage(
    m: ClaimedMessage,
    runId: string,
    take: () => Promise<AcquiredRun>,
  ): Promise<AcquiredRun> {
    const { store, clock, logger } = this.o;
    const outage = (e: unknown): boolean => store.isUnavailable?.(e) === true;
    // The first try outside the retry loop, as retryJournalWrite does: nearly every start commits at once.
    let first: { error: unknown };
    try {
      return await take();
    } catch (e) {
      if (!outage(e)) throw e;
      first = { error: e };
    }
    const started = clock.now();
    const r = await retryAfterFailure(take, outage, {
      firstFailure: first,
      signal: this.stopping.signal,
      giveUp: () =>
        clock.now() >= m.leaseExpiresAt
          ? "its message's lease ran out"
          : clock.now() - started >= this.o.leaseMs
            ? "a run lease went by"
            : undefined,
      onRetry: (err, n, delayMs) =>
        logger.warn(
          { err, runId, messageId: m.id, attempt: m.attempts, try: n, retryInMs: delayMs },
          "durable delivery: starting its run failed (the store is unavailable); retrying",
        ),
    });
    if (!r.ok) throw r.error;
    return r.value;
  }

  private async deliverOnce(
    flow: AnyFlow,
    m: ClaimedMessage,
    retryable: boolean,
    runId: string,
  ): Promise<DurableDelivery> {
    const { store, clock } = this.o;
    this.delivering.set(runId, (this.delivering.get(runId) ?? 0) + 1);
    try {
      const owner = this.nextOwner();
      const acquired = await this.startThroughOutage(m, runId, () =>
        store.startRun({
          id: runId,
          flow: flow.name!,
          input: m.payload,
          parentRunId: m.parentRunId,
          owner,
          now: clock.now(),
          leaseMs: this.o.leaseMs,
        }),
      );
      const outcome = await this.drive(
        this.deps,
        acquired,
        (session, undos) =>
          this.o.execute(flow, acquired.run.input, {
            runId,
            attempt: m.attempts,
            parentRunId: m.parentRunId,
            session,
            undos,
          }),
        { retryable },
      );
      if (outcome.kind === "failed") {
        const failure = errorRecord(outcome.error);
        // Ended by an operator too (terminate): every redelivery would only read the same failure.
        const final = failure.code === RECOVERIES_EXCEEDED || failure.code === TERMINATED;
        return { kind: "error", failure, ...(final ? { final: true } : {}) };
      }
      return { kind: "ok" };
    } finally {
      const n = this.delivering.get(runId)! - 1;
      if (n === 0) this.delivering.delete(runId);
      else this.delivering.set(runId, n);
    }
  }

  /**
   * Boot: resumes running runs whose lease lapsed (their instance died).
   * Orphans list running runs first: page until a page holds a sleeper (those
   * the wake timer covers), so a boot over 100 000 parked runs reads one page.
   */
  async orphanScan(): Promise<void> {
    // No durable flow here (an app that only emits or operates on the store): nothing it may take.
    if (this.durableFlows.length === 0) return;
    let scanned = 0;
    let resumed = 0;
    // A run this instance cannot run (unknown flow) is released at once and lists again: page on
    // only while pages bring runs not seen yet.
    const seen = new Set<string>();
    for (;;) {
      const page = await this.o.store.listOrphans(this.o.clock.now(), ORPHAN_PAGE, {
        flows: this.durableFlows,
      });
      scanned += page.length;
      const running = page.filter((r) => r.status === "running" || r.status === "compensating");
      const fresh = running.filter((r) => !seen.has(r.id));
      for (const run of fresh) {
        // No free permit: leave the rest — their leases lapsed, so they are due for the wake
        // scheduler, which takes them as permits free (boot does not wait for them).
        if (this.permits.tryTake(1) === 0) break;
        seen.add(run.id);
        try {
          // In flight only: a run its holder parked since the list waits for its wake time.
          const acquired = await this.o.store.acquireRun({
            runId: run.id,
            owner: this.nextOwner(),
            now: this.o.clock.now(),
            leaseMs: this.o.leaseMs,
            inFlightOnly: true,
          });
          this.track(this.resumeHeld(acquired));
          resumed++;
        } catch (e) {
          this.permits.release();
          // Taken meanwhile by another instance (busy), or finished (OKE1310) or gone (OKE1311)
          // between the list and the take: another instance's run to end, not this boot's failure.
          if (e instanceof JournalLeaseBusy || goneSinceListed(e)) continue;
          throw e;
        }
      }
      if (running.length < ORPHAN_PAGE || fresh.length === 0 || this.permits.free === 0) break;
    }
    if (resumed > 0) this.o.logger.info({ scanned, resumed }, "orphan scan: runs resumed");
  }

  /** Arms the wake timer on the earliest deadline of this instance's flows; none without durable flows. */
  startScheduler(): void {
    if (this.durableFlows.length === 0) return;
    this.scheduler.start();
  }

  /**
   * Moves a sleeper's wake time to now. When `resumeHere`, also takes the run
   * and resumes it in this instance (else any scheduler picks it up).
   */
  async wakeEarly(runId: string, resumeHere: boolean): Promise<WakeEarlyResult> {
    // Set once any resume of this run starts here while we work: the wake event can race us
    // through our own scheduler, and that run may even finish before we look.
    this.wakeWatch.set(runId, false);
    try {
      const outcome = await this.wakeEarlyWatched(runId, resumeHere);
      return { outcome: outcome === "resumed" || this.wakeWatch.get(runId) ? "resumed" : outcome, runId };
    } finally {
      this.wakeWatch.delete(runId);
    }
  }

  private async wakeEarlyWatched(runId: string, resumeHere: boolean): Promise<WakeEarlyResult["outcome"]> {
    const { store, clock } = this.o;
    // Reserved here ahead of its wake time (its lease is ours): resumed now, under its permit.
    if (this.scheduler.wakeNow(runId)) return "resumed";
    const moved = await store.wakeEarly(runId, clock.now());
    if (!moved) throw new ClockResourceNotFoundError(runId);
    if (!resumeHere) return "wake time only";
    // A run of a flow this app does not have: leave it sleeping (now due) for an instance that has it.
    const run = await store.getRun(runId);
    if (run === undefined || !this.durableFlows.includes(run.flow)) return "wake time only";
    while (this.permits.tryTake(1) === 0) {
      if (this.wakeWatch.get(runId)) return "resumed";
      // Every permit busy with resumes: the scheduler takes it when one frees.
      if (!this.scheduler.claiming) return "wake time only";
      // A claim round holds the spare permits only while it claims: wait for it.
      await this.scheduler.settled();
    }
    try {
      const acquired = await store.acquireRun({
        runId,
        owner: this.nextOwner(),
        now: clock.now(),
        leaseMs: this.o.leaseMs,
      });
      this.track(this.resumeHeld(acquired));
      return "resumed";
    } catch (e) {
      this.permits.release();
      // The wake event raced us and a scheduler (maybe ours: see wakeWatch) took it, or ran it to the end.
      if (e instanceof JournalLeaseBusy || (e instanceof OkeError && e.code === "OKE1310"))
        return "wake time only";
      throw e;
    }
  }

  /** Resumes a run under a permit already taken, and gives the permit back when it ends. */
  private async resumeHeld(acquired: AcquiredRun): Promise<InvokeResult | undefined> {
    if (this.wakeWatch.has(acquired.run.id)) this.wakeWatch.set(acquired.run.id, true);
    try {
      return await this.resume(acquired);
    } finally {
      this.permits.release();
    }
  }

  /**
   * A run the wake scheduler reserved ahead of its wake time (the store still reads it sleeping,
   * its lease ours) resumes now: the claim that makes it running is sent and not awaited, so the
   * code after the sleep starts at once (the claim goes out just after it), and every write of the run (append, park, finish, renew,
   * release: a call carrying its id and our owner) waits for that claim first. The store thus sees
   * the run running before its next write on every driver — the order is kept here, not by a
   * connection (a postgres pool may send two statements on two connections). A claim that finds
   * the reservation gone leaves the run's writes refused by their fence, as a lost lease. A resume
   * late enough for that to happen (reservationLate) waits for the claim before any code runs.
   */
  private reservedStart(acquired: AcquiredRun): {
    acquired: AcquiredRun;
    deps: DurableDeps;
    /** For a reserved run: whether the claim took it (false when it failed or found the reservation gone). */
    taken?: Promise<boolean>;
  } {
    const run = acquired.run;
    const owner = run.leaseOwner;
    if (run.status !== "sleeping" || owner === null) return { acquired, deps: this.deps };
    const { store, clock, logger } = this.o;
    const claim = () =>
      store.claimDueRuns({
        owner,
        now: clock.now(),
        max: 1,
        leaseMs: this.o.leaseMs,
        runIds: [run.id],
        sleepersDueBy: run.wakeAt ?? clock.now(),
      });
    // Sent from the check phase, after the replay's microtasks have reached the code after the sleep:
    // building and sending the statement is event-loop work the wake would otherwise wait behind.
    // Retried through an outage like a journal write: the code after the sleep is already running
    // and the reservation is ours until its lease lapses, so a claim that gets through takes the run
    // and that code's writes land. Given up once, a step it ran would run again after the lapse.
    const taken = new Promise<void>((resolve) => setImmediate(resolve))
      .then(() =>
        retryJournalWrite(this.deps, "claim of a reserved run", run.id, async (attempt) => {
          // A try whose reply was lost may have taken it: then it runs under our lease already.
          if (attempt > 1) {
            const now = await store.getRun(run.id);
            if (now?.status === "running" && now.leaseOwner === owner) return true;
          }
          return (await claim()).some((a) => a.run.id === run.id);
        }),
      )
      .catch((e: unknown) => {
        logger.warn(
          { err: e, runId: run.id },
          "durable run: resuming a reserved run failed; its writes will be refused",
        );
        return false;
      });
    const ours = (a: unknown): boolean =>
      typeof a === "object" &&
      a !== null &&
      (a as { runId?: unknown }).runId === run.id &&
      (a as { owner?: unknown }).owner === owner;
    const gated = new Proxy(store, {
      get(target, prop) {
        const v: unknown = Reflect.get(target, prop, target);
        if (typeof v !== "function") return v;
        const f = v as (...args: unknown[]) => unknown;
        return (...args: unknown[]) =>
          ours(args[0]) ? taken.then(() => f.apply(target, args)) : f.apply(target, args);
      },
    });
    return {
      acquired: { ...acquired, run: { ...run, status: "running", wakeAt: null } },
      deps: { ...this.deps, store: gated },
      taken,
    };
  }

  /**
   * True when a reserved run resumes so late that its reservation may have lapsed and another
   * instance taken the run (an event-loop stall of more than half the lease on a loaded host):
   * then no code may run before the claim is confirmed, or a step the other instance journaled
   * would run again here.
   */
  private reservationLate(run: RunRecord): boolean {
    return run.leaseExpiresAt !== null && this.o.clock.now() > run.leaseExpiresAt - this.o.leaseMs / 2;
  }

  /** Continues a run this instance holds: replay its journal, then run on. */
  private async resume(reservedOrHeld: AcquiredRun): Promise<InvokeResult | undefined> {
    const { acquired, deps, taken } = this.reservedStart(reservedOrHeld);
    const { store, clock, logger } = this.o;
    // On time (every wake but a stalled one) the code after the sleep starts before the claim returns.
    if (taken !== undefined && this.reservationLate(reservedOrHeld.run) && !(await taken)) {
      logger.info(
        { runId: acquired.run.id },
        "durable run: resumed after its reservation lapsed and another instance took it; left to that instance",
      );
      return undefined;
    }
    const flow = this.o.flows.get(acquired.run.flow);
    if (!flow) {
      // A rolling deploy: this instance runs a version without the flow. Leave the run to one that has
      // it — due again shortly, so any instance's scheduler takes it then (this one included, which
      // releases it again: a slow retry, never a busy loop).
      if (acquired.recoveredFrom !== undefined) this.takeovers.note(acquired.run, acquired.recoveredFrom);
      const retryAt = clock.now() + UNKNOWN_FLOW_RETRY_MS;
      logger.warn(
        { runId: acquired.run.id, flow: acquired.run.flow, retryAt },
        "durable run: its flow is not in this app; leaving it for another instance",
      );
      // With its reason, so operators see why it waits (RunRecord.held; `oke run` gives the fix).
      await releaseRetried({ ...this.deps, store }, acquired.run.id, acquired.run.leaseOwner!, {
        retryAt,
        hold: unknownFlowHold(acquired.run, this.o.instanceId),
      });
      return undefined;
    }
    const run = acquired.run;
    const { ending, parked } = await this.consumerLook(acquired);
    // After the park that delivered its message, a consumer's failing step is retried as before it:
    // not journaled while the message has attempts left (the attempt that parked goes on here).
    const retryable =
      parked !== undefined &&
      parked.message.attempts <= parked.consumer.retries &&
      store.resettleDelivered !== undefined;
    const outcome = ending
      ? await this.driveEnded(flow, acquired, ending, "resume")
      : await this.drive(
          deps,
          acquired,
          (session, undos) =>
            this.o.execute(flow, run.input, {
              runId: run.id,
              attempt: parked?.message.attempts ?? 1,
              parentRunId: run.parentRunId,
              session,
              undos,
            }),
          { retryable },
        );
    if (parked !== undefined && outcome.kind === "failed")
      await this.resettleParked(parked, run, outcome.error, outcome.retry);
    // A run ended past durable.maxRecoveries was logged at error level as it began ending; one
    // released for its message's retry is a warning (resettleParked), not a failed run.
    if (
      outcome.kind === "failed" &&
      !outcome.retry &&
      errorRecord(outcome.error).code !== RECOVERIES_EXCEEDED
    )
      logger.error({ runId: run.id, flow: flow.name, err: outcome.error }, "durable run failed");
    return outcome.kind === "completed"
      ? { kind: "returned", value: outcome.value }
      : outcome.kind === "parked"
        ? { kind: "parked", runId: run.id }
        : undefined;
  }

  private track(p: Promise<unknown>): void {
    const t = p
      .catch((e: unknown) => this.o.logger.error({ err: e }, "background task failed"))
      .finally(() => this.tasks.delete(t));
    this.tasks.add(t);
  }

  /** True when no resume runs. */
  /** True when no resume runs and no claim round is in flight. */
  isIdle(): boolean {
    return this.tasks.size === 0 && this.scheduler.active === 0 && !this.scheduler.claiming;
  }

  /** Resolves when the resumes running now, and the scheduler's claim round in flight, are done. */
  async whenIdle(): Promise<void> {
    await Promise.allSettled([...this.tasks, this.scheduler.settled()]);
  }

  /**
   * Stops the wake scheduler, then waits up to `timeoutMs` in all for every
   * run this instance drives (any path: start, delivery, orphan scan, wake
   * early, scheduler). Runs still going at the deadline are left to their
   * lease (see `runningIds`), marked as a graceful stop's (leaveToLease).
   */
  async stop(timeoutMs: number): Promise<void> {
    // On the monotonic clock: a host clock step while the scheduler stops must not move the deadline.
    const deadline = performance.now() + timeoutMs;
    await this.scheduler.stop(timeoutMs);
    let timer: NodeJS.Timeout | undefined;
    const expired = new Promise<"expired">((r) => {
      timer = setTimeout(() => r("expired"), Math.max(0, deadline - performance.now()));
      timer.unref();
    });
    try {
      // A resume that ends may have started another (a scan's next run): wait until none is left.
      while (this.driving.size > 0 || this.tasks.size > 0) {
        const all = Promise.allSettled([...this.driving.keys(), ...this.tasks]);
        if ((await Promise.race([all, expired])) === "expired") {
          this.stopping.abort();
          await this.leaveToLease();
          return;
        }
      }
    } finally {
      clearTimeout(timer);
      this.takeovers.flush();
    }
  }

  /**
   * At the stop deadline, the runs whose attempts still run here are left to their leases as a
   * graceful stop's (JournalStore.leaveToLease): nobody takes one before its lease lapses — the
   * attempt may run on until the process exits, writing under the lease's new name — and the
   * instance that takes it then counts no recovery. Without this, each deploy that cut a step
   * longer than shutdownTimeoutMs counted one, and a healthy run failed with OKE1303 after
   * durable.maxRecoveries deploys. Best effort and bounded: unmarked (no such store call, an outage),
   * a run's takeover counts a recovery, as a crash's does.
   */
  private async leaveToLease(): Promise<void> {
    const { store, clock, logger } = this.o;
    if (store.leaveToLease === undefined) return;
    const left = new Map<string, { owner: string; session?: JournalSession }>();
    for (const d of this.driving.values()) {
      const owner = d.session?.owner ?? d.owner;
      if (owner !== null) left.set(d.runId, { owner, ...(d.session ? { session: d.session } : {}) });
    }
    if (left.size === 0) return;
    try {
      const ids = await markWithin(
        store.leaveToLease({
          runs: [...left].map(([runId, { owner }]) => ({ runId, owner })),
          now: clock.now(),
        }),
      );
      if (ids === "late") {
        logger.warn(
          { runIds: [...left.keys()] },
          `durable: the store did not mark the runs left at the stop deadline within ${STOP_MARK_TIMEOUT_MS} ms; each one's takeover may count a recovery`,
        );
        return;
      }
      for (const id of ids) {
        const l = left.get(id);
        l?.session?.leftToLease(stoppedOwner(l.owner));
      }
    } catch (err) {
      logger.warn(
        { err, runIds: [...left.keys()] },
        "durable: marking the runs left at the stop deadline failed; each one's takeover counts a recovery",
      );
    }
  }
}

/**
 * OKE1305: the run id a delivery or a call derives is taken by a run of another flow — a message id
 * equal to a derived child id (`<run id>.<n>`), or the reverse. Taking that run's outcome would settle
 * the message (or answer the call) without this flow ever running.
 */
function foreignRun(runId: string, flow: AnyFlow, run: RunRecord): OkeError {
  return new OkeError({
    code: "OKE1305",
    message: `journal: run "${runId}" of flow "${flow.name ?? "?"}" cannot start: a run of flow "${run.flow}" has that id`,
    fix: "A durable consumer's run id is its message id, and fx.call names a child <parent run id>.<n>: give messages ids that cannot be another run's, e.g. prefixed with what they name (\"invoice:7\").",
  });
}

/**
 * The outcome of an existing run `start` finds under its id: returned (completed), thrown (failed),
 * parked (sleeping), or undefined for one still to drive. A run of another flow is OKE1305.
 */
function outcomeOf(runId: string, flow: AnyFlow, run: RunRecord): InvokeResult | undefined {
  if (run.flow !== flow.name) throw foreignRun(runId, flow, run);
  if (run.status === "completed") return { kind: "returned", value: run.output };
  // Rebuilt as the journal rebuilds a failure (the run keeps its detail since compensation.ts does):
  // the same error the caller would have caught had it driven the child itself.
  if (run.status === "failed")
    throw restoreFailure(run.error ?? { code: "Error", message: `run "${runId}" failed` });
  if (run.status === "sleeping") return { kind: "parked", runId };
  return undefined;
}

/**
 * A delivery that found its run failed: the run's failure. Final when the run was ended past
 * durable.maxRecoveries or by an operator's terminate: a retry of the message would only read that
 * failure again, so the message is dead-lettered at once with the run's code, not after the rest of
 * its attempts.
 */
function failedDelivery(run: RunRecord): DurableDelivery {
  // The message's failure: code and message (the run's error may carry its journal detail too).
  const failure =
    run.error === undefined
      ? { code: "Error", message: "run failed" }
      : { code: run.error.code, message: run.error.message };
  // Ended by an operator too (terminate): every redelivery would only read the same failure.
  const final = failure.code === RECOVERIES_EXCEEDED || failure.code === TERMINATED;
  return { kind: "error", failure, ...(final ? { final: true } : {}) };
}
