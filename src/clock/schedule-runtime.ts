/** The schedule runtime: reconciles declared clocks, keeps one timer on the nearest due slot, fires through the store. */
/**
 * The schedule runtime: reconciles declared clocks at boot, keeps ONE timer on
 * the nearest due slot of all of them, and fires due slots through
 * `store.fire` (one fire per slot for the whole fleet, catch-up "one").
 */
import type { Logger } from "../log/logger.ts";
import type { DeclaredSchedule, FireRequest, ScheduleRecord, ScheduleSpec } from "../store/schedule-types.ts";
import { effectiveSpec } from "../store/schedule-types.ts";
import { loopFailureLog } from "../store/store-health.ts";
import type { ClaimedMessage, NewMessage, Store } from "../store/types.ts";
import type { Clock } from "./clock.ts";
import { dstNotes } from "./dst.ts";
import { FleetTime } from "./fleet-time.ts";
import { clockSignalName, type ClockInput, type ClockSchedule } from "./schedule.ts";
import { compiledSpec, type CompiledSpec } from "./schedule-spec.ts";

/** A clock bound to a flow in this app. */
export interface BoundClock {
  name: string;
  schedule: ClockSchedule<unknown>;
  flow: string;
}

export interface ScheduleRuntimeOptions {
  store: Store;
  clock: Clock;
  logger: Logger;
  clocks: readonly BoundClock[];
  /**
   * Read "now" from the store's clock (fleet time, fleet-time.ts) when the
   * store has one, and arm the timer on it (monotonic). For a clock that is
   * not the fleet's already: time travel is its own truth, and an app's clock
   * is fleet time on PostgreSQL.
   */
  fleetTime?: boolean;
  /**
   * Claim at fire (stores with `enqueueClaimed`): a slot of the clock's
   * worker pool, held while the fire is written already claimed, so the
   * handler starts on the commit with no claim round trip.
   */
  claimAtFire?: {
    worker: string;
    leaseMs: number;
    reserve(signal: string): { start(m: ClaimedMessage): void; release(): void } | undefined;
  };
}

/** After a failed store call, or a fire refused without the state changing, try again this much later. */
const RETRY_MS = 1_000;
/**
 * A failed check is tried again first this soon, doubling to RETRY_MS: a dropped connection is
 * replaced in well under a second, and a first retry a whole second later let an every("1s") slot
 * be folded into the next (missedRuns 1) with both instances up (an audit's kill of one connection).
 */
const FIRST_RETRY_MS = 100;

/**
 * How long after a slot an instance that won none of its last fires checks it (a follower). Every
 * instance firing at the same instant made each slot cost one 100-row fire statement per instance,
 * all at once on the same cores, though only one wins: with 3 instances on 2 cores the winner's
 * statement took 22 ms (p50) against 13 ms alone, and the fire lag followed (bench/clock-lag.ts).
 * The instance that won keeps firing on the slot; the others look 25 ms later, after its commit
 * as a rule, re-reading the schedules (a read, not a fire) and firing only what is still due. So
 * when the winner is gone, a slot is late by this much once, and the follower that fires it leads.
 */
export const FOLLOWER_DELAY_MS = 25;

interface Live {
  record: ScheduleRecord;
  compiled: CompiledSpec;
}

/** Slots at or before this instant are not due for the record: its last fire or its anchor. */
export const baseOf = (r: ScheduleRecord): number => Math.max(r.anchorAt, r.lastSlot ?? -Infinity);

/** When clock `r` fires next as of `now`: its latest slot already due, else its next one; null while paused or orphaned. */
export function nextFireAt(r: ScheduleRecord, now: number): number | null {
  if (r.paused || r.orphaned) return null;
  const c = compiledSpec(effectiveSpec(r));
  return c.latestDue(baseOf(r), now)?.slot ?? c.next(Math.max(baseOf(r), now));
}

/** The id of a slot's message: also the run id of a durable clock flow. */
export const slotMessageId = (name: string, slot: number): string => `${clockSignalName(name)}:${slot}`;

export function clockMessage(bound: BoundClock, id: string, input: ClockInput): NewMessage {
  return {
    id,
    signal: clockSignalName(bound.name),
    key: bound.schedule.overlap ? null : bound.name,
    payload: input,
    parentRunId: null,
  };
}

/** A spec as logs and operator notes write it: `every 10s`, `cron "0 7 * * *" in Europe/Paris`. */
export const specText = (s: ScheduleSpec): string =>
  s.cron !== null ? `cron "${s.cron}" in ${s.timezone}` : `every ${s.every ?? "?"}`;

/** Two specs fire the same slots: the same cron in the same zone, or the same interval (whose zone means nothing). */
const sameSlots = (a: ScheduleSpec, b: ScheduleSpec): boolean =>
  a.cron === b.cron && a.every === b.every && (a.cron === null || a.timezone === b.timezone);

/**
 * The stored declaration of clock `r` when it is not what `code` (this instance's code) declares,
 * else undefined. Each boot stores its own code's declaration and the last one wins for the whole
 * fleet, so during a rolling deploy the store may hold the other version's.
 */
export function declaredElsewhere(r: ScheduleRecord, code: ScheduleSpec): ScheduleSpec | undefined {
  return sameSlots(r.declared, code) ? undefined : r.declared;
}

/**
 * What an operator (and this instance's log) is told when the stored declaration of `r` is another
 * code's: both specs, which one fires and why, and what to do.
 */
export function declaredElsewhereNote(r: ScheduleRecord, code: ScheduleSpec): string {
  const firing =
    r.override === null
      ? `The stored ${specText(r.declared)} fires${r.paused ? " once resumed" : " now"}, on every instance`
      : `The operator's edit (${specText(r.override)}) fires${r.paused ? " once resumed" : " now"}, on every instance, and the stored ${specText(r.declared)} after a reset`;
  return (
    `the store has ${specText(r.declared)}, declared by another instance's code (a different version of the app); ` +
    `this instance's code declares ${specText(code)}. ${firing}: the last instance to boot sets a clock's spec ` +
    `for the whole fleet; finish the deploy, or restart this instance to make its code's spec current`
  );
}

export class ScheduleRuntime {
  private readonly bound: Map<string, BoundClock>;
  private readonly live = new Map<string, Live>();
  private running = false;
  /** stop() was called: a start() still awaiting the store (or called later, a boot racing the stop) arms nothing. */
  private stopped = false;
  /** The start() in progress: its reconcile is a store write, which stop() waits for. */
  private starting: Promise<void> | undefined;
  private cancelTimer: (() => void) | undefined;
  private timerAt = Infinity;
  private unsubscribe: (() => void) | undefined;
  private loop: Promise<void> | undefined;
  private again = false;
  /** The armed timer follows a refused slot: the check it starts re-reads the schedules first. */
  private timerStale = false;
  /** A store wake arrived during the check in progress: the next one re-reads. */
  private againStale = false;
  /** Slots a tick tried and the store refused, so an unchanged state is not retried in a busy loop. */
  private refused = new Set<string>();
  /** This instance's last fire statement won none of its slots: it checks the next ones FOLLOWER_DELAY_MS late. */
  private following = false;
  /**
   * Per clock, the stored declaration of another code already warned about: one warning per
   * (clock, stored spec), not one per re-read. Cleared when the store holds this code's spec again,
   * so a later revert (another restart of the other version) is warned about again.
   */
  private readonly warnedElsewhere = new Map<string, string>();

  private readonly fleet: FleetTime | undefined;

  /** A failed check's log line: once per store outage at warn, else error (store-health.ts). */
  private readonly checkFailed: ReturnType<typeof loopFailureLog>;
  /** Checks failed in a row: the next retry waits FIRST_RETRY_MS doubled that many times (RETRY_MS at most). */
  private failedChecks = 0;

  constructor(private readonly o: ScheduleRuntimeOptions) {
    this.checkFailed = loopFailureLog(o.store, o.logger);
    this.bound = new Map(o.clocks.map((c) => [c.name, c]));
    const storeTime = o.store.storeTime?.bind(o.store);
    this.fleet =
      o.fleetTime === true && storeTime !== undefined && o.clocks.length > 0
        ? new FleetTime(o.clock, storeTime, o.logger)
        : undefined;
  }

  /** Now on the fleet's clock. */
  now(): number {
    return this.fleet?.now() ?? this.o.clock.now();
  }

  /** The bound clock of this app by name, if any. */
  get(name: string): BoundClock | undefined {
    return this.bound.get(name);
  }

  compile(record: ScheduleRecord): CompiledSpec {
    return compiledSpec(effectiveSpec(record));
  }

  /** Reconciles the declared clocks with the store, warns about DST-sensitive ones, arms the timer. */
  start(): Promise<void> {
    if (this.running || this.stopped) return Promise.resolve();
    this.starting ??= this.begin().finally(() => (this.starting = undefined));
    return this.starting;
  }

  private async begin(): Promise<void> {
    await this.fleet?.start();
    // Stopped while measuring fleet time (an app stopped during boot): no reconcile goes out.
    if (this.stopped) return;
    const records = await this.o.store.reconcileSchedules(this.declared(), this.now());
    // Stopped while the reconcile was out: no timer, no subscription, no fire after the app stopped.
    if (this.stopped) return;
    for (const r of records) {
      if (r.orphaned && r.lastSlot !== null && !this.bound.has(r.name))
        this.o.logger.info({ clock: r.name }, `clock "${r.name}" is no longer declared: marked orphaned`);
      if (!this.bound.has(r.name)) continue;
      for (const note of dstNotes(effectiveSpec(r), this.now()))
        this.o.logger.warn(
          { clock: r.name, timezone: effectiveSpec(r).timezone },
          `clock "${r.name}": ${note}`,
        );
    }
    this.running = true;
    // Another instance's pause, edit or reconcile arrives as a wake: re-read and re-arm.
    this.unsubscribe = this.o.store.subscribe((e) => {
      if (e.kind === "wake") this.kick(false);
    });
    this.load(records);
    this.kick(true);
  }

  /** The clocks this instance binds, as the store's reconcile takes them. */
  private declared(): DeclaredSchedule[] {
    return [...this.bound.values()].map((b) => ({
      name: b.name,
      spec: b.schedule.spec,
      overridable: b.schedule.overridable,
      flow: b.flow,
      description: b.schedule.description ?? null,
    }));
  }

  /**
   * Re-reads the schedules. A clock this instance binds that another instance's boot marked orphaned
   * (it runs older or newer code without that clock: a rolling deploy, a crash restart) is taken back
   * at once — declared again, orphaning nothing else — so a clock fires while any live instance
   * declares it, instead of stopping fleet-wide until a declaring instance boots again.
   */
  private async reload(): Promise<void> {
    let records = await this.o.store.listSchedules();
    const lost = records.filter((r) => r.orphaned && this.bound.has(r.name)).map((r) => r.name);
    if (lost.length > 0 && !this.stopped) {
      records = await this.o.store.reconcileSchedules(this.declared(), this.now(), { orphanMissing: false });
      this.o.logger.info(
        { clocks: lost },
        `clock ${lost.map((n) => `"${n}"`).join(", ")} was marked orphaned by an instance that does not declare it; declared here, so this instance takes it back`,
      );
    }
    this.load(records);
  }

  private load(records: readonly ScheduleRecord[]): void {
    this.live.clear();
    for (const r of records) {
      const b = this.bound.get(r.name);
      if (b === undefined) continue;
      this.live.set(r.name, { record: r, compiled: this.compile(r) });
      this.noteDeclaredElsewhere(r, b.schedule.spec);
    }
  }

  /**
   * Warns once when the stored declaration of a clock this instance binds is another code's (an
   * instance of another version booted after this one). Which spec fires does not change: the last
   * boot wins for the whole fleet, and this instance fires what the store holds, like every other.
   */
  private noteDeclaredElsewhere(r: ScheduleRecord, code: ScheduleSpec): void {
    const stored = declaredElsewhere(r, code);
    if (stored === undefined) {
      this.warnedElsewhere.delete(r.name);
      return;
    }
    const key = JSON.stringify([stored.cron, stored.every, stored.timezone]);
    if (this.warnedElsewhere.get(r.name) === key) return;
    this.warnedElsewhere.set(r.name, key);
    this.o.logger.warn(
      { clock: r.name, stored: { ...stored }, declared: { ...code }, firing: { ...effectiveSpec(r) } },
      `clock "${r.name}": ${declaredElsewhereNote(r, code)}`,
    );
  }

  /**
   * Runs the loop once more (re-reading the store first unless `fresh`);
   * coalesces. A timer that comes due while a check runs does not add a
   * re-read: only a store wake (another instance's change) makes the next
   * check read the schedules again.
   */
  private kick(fresh: boolean): void {
    if (!this.running) return;
    if (this.loop !== undefined) {
      this.again = true;
      if (!fresh) this.againStale = true;
      return;
    }
    this.loop = this.run(fresh).finally(() => {
      this.loop = undefined;
      if (this.again && this.running) {
        const stale = this.againStale;
        this.again = false;
        this.againStale = false;
        this.kick(!stale);
      }
    });
  }

  private async run(fresh: boolean): Promise<void> {
    try {
      if (!fresh) await this.reload();
      for (let round = 0; this.running && round < 100; round++) {
        const fired = await this.fireDue();
        if (fired === "none") break;
        // Every fire ours: the bases moved exactly as we wrote them, no read needed. Otherwise
        // another instance fired (or changed) some: re-read so their bases move on too.
        if (fired === "all") continue;
        await this.reload();
        if (fired === "refused") break;
      }
      this.arm();
      this.failedChecks = 0;
    } catch (e) {
      this.checkFailed(e, {}, "clock: schedule check failed; retrying");
      this.timerStale = true;
      this.armAt(this.now() + Math.min(RETRY_MS, FIRST_RETRY_MS * 2 ** this.failedChecks++));
    }
  }

  /**
   * Fires every due slot once: "all" when each fire was ours (their records
   * are moved on here), "some" when others were refused, "refused" when none
   * was ours, "none" when nothing was due.
   */
  private async fireDue(): Promise<"none" | "all" | "some" | "refused"> {
    const now = this.now();
    const reqs: FireRequest[] = [];
    const keys: string[] = [];
    for (const [name, l] of this.live) {
      const r = l.record;
      if (r.paused || r.orphaned) continue;
      const due = l.compiled.latestDue(baseOf(r), now);
      if (due === null) continue;
      const key = `${name}@${due.slot}@${r.version}`;
      if (this.refused.has(key)) continue;
      keys.push(key);
      const bound = this.bound.get(name)!;
      const input: ClockInput = {
        clock: name,
        scheduledAt: due.slot,
        firedAt: now,
        missedRuns: due.count - 1,
      };
      reqs.push({
        name,
        slot: due.slot,
        version: r.version,
        missedRuns: due.count - 1,
        now,
        message: clockMessage(bound, slotMessageId(name, due.slot), input),
      });
    }
    if (reqs.length === 0) return "none";
    const cf = this.o.store.enqueueClaimed === undefined ? undefined : this.o.claimAtFire;
    // Keyed fires (overlap: false) wait their turn in the key: only the claim may decide it.
    const slots = reqs.map((r) => (r.message.key === null ? cf?.reserve(r.message.signal) : undefined));
    reqs.forEach((r, i) => {
      // Leases are read on each worker's own clock, as for any claim.
      if (slots[i] !== undefined)
        r.claim = { worker: cf!.worker, leaseExpiresAt: this.o.clock.now() + cf!.leaseMs };
    });
    // One statement for every due schedule (postgres): instances firing together split the work.
    let results: boolean[];
    try {
      results = await this.o.store.fireBatch(reqs);
    } catch (e) {
      for (const s of slots) s?.release();
      throw e;
    }
    reqs.forEach((r, i) => {
      const slot = slots[i];
      if (slot === undefined) return;
      if (!results[i] || r.claim === undefined) return slot.release();
      slot.start({
        id: r.message.id,
        signal: r.message.signal,
        key: r.message.key,
        payload: r.message.payload,
        parentRunId: null,
        attempts: 1,
        createdAt: now,
        lockedBy: r.claim.worker,
        leaseExpiresAt: r.claim.leaseExpiresAt,
      });
    });
    this.refused = new Set(keys.filter((_, i) => !results[i]));
    // Won some (a split with another instance, or all): keep firing on the slot.
    this.following = !results.some((x) => x);
    if (this.following) return "refused";
    // What the store wrote for each of our fires (schedule-types.ts FireRequest).
    reqs.forEach((r, i) => {
      const l = this.live.get(r.name);
      if (!results[i] || l === undefined) return;
      l.record = { ...l.record, lastSlot: r.slot, lastFiredAt: r.now, lastMissedRuns: r.missedRuns };
    });
    return results.every((x) => x) ? "all" : "some";
  }

  /** One timer on the nearest next slot of every active schedule. */
  private arm(): void {
    const now = this.now();
    let at = Infinity;
    let stale = false;
    for (const l of this.live.values()) {
      const r = l.record;
      if (r.paused || r.orphaned) continue;
      const due = l.compiled.latestDue(baseOf(r), now);
      const key = due === null ? "" : `${r.name}@${due.slot}@${r.version}`;
      let next: number | null;
      if (due === null) next = l.compiled.next(Math.max(baseOf(r), now));
      else if (!this.refused.has(key)) next = now;
      else {
        // Refused: another instance holds (or just fired) the slot and its commit was not visible
        // to our read yet. Look again at the next slot, not RETRY_MS after this check: arming
        // "now + 1 s" made every instance that lost a slot fire the next one late by the time this
        // check took, and a loss each second carried that lateness on. The timer re-reads first,
        // so the fire sees the other instance's commit (and counts missedRuns from it).
        stale = true;
        next = Math.min(now + RETRY_MS, l.compiled.next(due.slot) ?? Infinity);
      }
      if (next !== null && next < at) at = next;
    }
    // A follower looks after the leader's commit, and reads it first: what the leader fired is not due.
    if (this.following && at > now) at += FOLLOWER_DELAY_MS;
    this.timerStale = stale || this.following;
    if (at === Infinity) {
      this.cancelTimer?.();
      this.cancelTimer = undefined;
      this.timerAt = Infinity;
      return;
    }
    this.armAt(at);
  }

  /**
   * One timer on the instant `at` of now(). With fleet time it is fleet time's own timer, on the
   * monotonic clock: armed on the host clock at the matching local instant, a step of the host
   * clock back held a slot back by the size of the step.
   */
  private armAt(at: number): void {
    if (!this.running) return;
    if (this.cancelTimer !== undefined && at === this.timerAt) return;
    this.cancelTimer?.();
    this.timerAt = at;
    const timers = this.fleet ?? this.o.clock;
    this.cancelTimer = timers.at(at, () => {
      this.cancelTimer = undefined;
      this.timerAt = Infinity;
      this.kick(!this.timerStale);
    });
  }

  /**
   * Wraps the handler of a clock's fires: a failed attempt is recorded as the
   * schedule's last error, a later success clears it.
   */
  wrapHandler<O extends { kind: string; failure?: { code: string; message: string } }>(
    name: string,
    handle: (m: ClaimedMessage) => Promise<O>,
  ): (m: ClaimedMessage) => Promise<O> {
    return async (m) => {
      const out = await handle(m);
      const slot = (m.payload as Partial<ClockInput> | undefined)?.scheduledAt ?? 0;
      try {
        // The record in memory says whether there is an error to clear, so a success costs no
        // store call as a rule. It is kept in step here for this instance's own writes; another
        // instance's error or clear reaches it as a store wake (the drivers send one when a clock
        // gains or loses its error), which re-reads the schedules.
        let lastError: ScheduleRecord["lastError"] | undefined;
        if (out.kind === "error" && out.failure) {
          lastError = { slot, code: out.failure.code, message: out.failure.message, at: this.now() };
          await this.o.store.recordScheduleError(name, lastError, this.now());
        } else if (out.kind === "ok" && this.live.get(name)?.record.lastError) {
          lastError = null;
          await this.o.store.recordScheduleError(name, null, this.now());
        }
        const l = this.live.get(name);
        if (lastError !== undefined && l !== undefined) l.record = { ...l.record, lastError };
      } catch (e) {
        this.o.logger.warn({ err: e, clock: name }, "clock: could not record the fire's outcome");
      }
      return out;
    };
  }

  /** The handler of a once signal's pool: clock signals get `wrapHandler`, others stay as they are. */
  handlerFor<O extends { kind: string; failure?: { code: string; message: string } }>(
    signal: string,
    handle: (m: ClaimedMessage) => Promise<O>,
  ): (m: ClaimedMessage) => Promise<O> {
    const b = [...this.bound.values()].find((c) => clockSignalName(c.name) === signal);
    return b === undefined ? handle : this.wrapHandler(b.name, handle);
  }

  /** A schedule check (and its fires) is in progress. */
  get busy(): boolean {
    return this.loop !== undefined;
  }

  /** Resolves when the check in progress (if any) ends. */
  whenIdle(): Promise<void> {
    return this.loop ?? Promise.resolve();
  }

  /**
   * Stops the timer and waits for a start() (its reconcile) or a check (its fires) in progress. No
   * store call goes out after this: a check re-tests `running` after each await. A fire already
   * sent commits or not as one statement (store.fire), so whether or not its answer arrives, the
   * next instance finds the slot fired or fires it itself, once. A fire written claimed for this
   * instance's pool is handed to the pool, whose own stop waits for it or leaves it to lazy reclaim.
   */
  async stop(): Promise<void> {
    this.stopped = true;
    this.running = false;
    this.fleet?.stop();
    this.unsubscribe?.();
    this.unsubscribe = undefined;
    this.cancelTimer?.();
    this.cancelTimer = undefined;
    // A failed start is boot's error, reported there.
    await this.starting?.catch(() => undefined);
    await Promise.all([this.loop, this.fleet?.settled()]);
  }
}
