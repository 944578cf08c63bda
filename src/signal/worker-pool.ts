/** WorkerPool: the claim → run → settle loop of one once-bound flow, with prefetch and batched settles. */
import { markWithin, STOP_MARK_TIMEOUT_MS } from "../store/stop-mark.ts";
import { loopFailureLog } from "../store/store-health.ts";
import type { ClaimedMessage } from "../store/types.ts";
import { budgetSpent, LEASE_EXPIRED, leaseSeconds, unstartedFailure } from "./attempt-budget.ts";
import { SettleQueue, type SettledBatch } from "./settle-queue.ts";
import type { HandlerOutcome, SlotReservation, WorkerPoolOptions } from "./worker-pool-types.ts";

export type { HandlerOutcome, SlotReservation, WorkerPoolOptions } from "./worker-pool-types.ts";

/** The outcome of a handler that threw or rejected without an outcome of its own. */
const thrown = (e: unknown): HandlerOutcome => ({
  kind: "error",
  failure: { code: "Error", message: String(e) },
});

/**
 * Delivery loop for one once-bound flow: wait for a wake-up or the next lease
 * expiry (one timer, never a polling loop), claim up to the free slots, run
 * handlers, settle in batches. Stopping stops claiming, waits for in-flight
 * handlers up to a deadline, gives back what it claimed and did not start, and leaves handlers
 * still running to lazy reclaim.
 */
export class WorkerPool {
  private running = false;
  private pumping = false;
  /** The claim loop in progress, so stop() can wait for a claim already sent. */
  private pumpDone: Promise<void> | undefined;
  private again = false;
  /** stop() waiting for `inflight` to reach 0. */
  private quietWaiters: Array<() => void> = [];
  /**
   * Handlers running now under a lease this pool still holds, by message id: the claim each runs
   * (what a stop leaves behind). The claim, not just the id: a handler that outlived its lease was
   * released (release()), and its late end must not end a later attempt of the same message.
   */
  private readonly runningIds = new Map<string, ClaimedMessage>();
  /** Spent-claim run lookups (settleWithRun) in flight, by message id, the same way. */
  private readonly lookups = new Map<string, ClaimedMessage>();
  /**
   * No lease held by a running handler or lookup runs out before this: a lower bound (raised only
   * by releaseLapsed's scan), so starting a message costs one comparison, not a scan.
   */
  private lapseAt = Infinity;
  /**
   * Handlers and lookups still running after their lease ran out. The message was anyone's to claim
   * from then on, so they were released: they take no slot, stop() does not wait for them, and their
   * outcome, when it comes, is still sent (the store fences it off once the message was claimed again).
   */
  private readonly pastLease = new Set<ClaimedMessage>();
  /** The ids in pastLease, each with how many of its attempts are there. */
  private readonly pastLeaseIds = new Map<string, number>();
  /**
   * A durable consumer's claims (whenSpent) started while an earlier attempt of their message still
   * ran here past its lease. That attempt may hold the message's run: when such a claim comes back
   * `abandon` (run busy), it is asked again once that attempt has ended (retryBehind) rather than
   * left to one more lease. Empty but for that case.
   */
  private readonly behindLate = new Set<ClaimedMessage>();
  /**
   * Those claims waiting, by message id, for the late attempt to end (then they go to the front of
   * the buffer), or let go when their own lease runs out first. Counted against claims like the
   * buffer; no slot.
   */
  private readonly parked = new Map<string, ClaimedMessage>();
  /** Claimed, not started yet (prefetch). */
  private buffer: ClaimedMessage[] = [];
  /** Moving average of this pool's handler run time (ms); 0 until a handler has ended. */
  private avgRunMs = 0;
  /**
   * The prefetch claims use now: `o.prefetch`, lowered while handlers are slow (prefetchFor), so a
   * buffered message still has lease enough to run when a slot frees up.
   */
  private prefetch: number;
  /** Room promised to claims in flight; the settle queue holds the hand-offs', so the two never take the same room twice. */
  private roomHeld = 0;
  private readonly settles: SettleQueue;
  private cancelTimer: (() => void) | undefined;
  private timerAt = Infinity;
  private unsubscribe: (() => void) | undefined;
  private idleWaiters: Array<() => void> = [];
  /**
   * False once a claim came back short (the queue had no more for us) and no
   * wake-up arrived since. Finishing a handler then needs no claim: new work
   * announces itself (enqueue events, NOTIFY, the lease timer). At idle this
   * saved two claims and two lease queries per message, which competed with
   * the next emit for the database.
   */
  private mayHaveMore = true;
  /** Slots held for claim-at-emit writes in flight; stop() waits for them. */
  private reserved = 0;
  private readonly reservations = new Set<Promise<void>>();
  /**
   * Set once stop() stopped waiting (everything ended, or its deadline passed): nothing starts after
   * that — not a buffered message a late handler's end would free a slot for, not what a claim still
   * in flight brings back. Those are given back unstarted (giveBack).
   */
  private stopped = false;
  /** Give-backs in flight (giveBack): stop() waits for those it sent before it returns. */
  private readonly givingBack = new Set<Promise<void>>();
  /**
   * Dropped last attempts whose never-started settle is not back yet: the pool claims nothing until it
   * is, or its own claim would reclaim the lapsed message first (fencing that settle off) and settle
   * it with the spent-claim text. Empty but for that rare drop.
   */
  private readonly dropsSettling = new Set<string>();

  /** A failed claim's log line: once per store outage at warn, else error (store-health.ts). */
  private readonly claimFailed: ReturnType<typeof loopFailureLog>;

  constructor(private readonly o: WorkerPoolOptions) {
    this.prefetch = o.prefetch;
    this.claimFailed = loopFailureLog(o.store, o.logger);
    this.settles = new SettleQueue({
      store: o.store,
      clock: o.clock,
      logger: o.logger,
      signal: o.signal,
      worker: o.worker,
      leaseMs: o.leaseMs,
      ...(o.handoff === undefined ? {} : { handoff: o.handoff }),
      running: () => this.running,
      settled: (b) => this.settled(b),
      after: () => this.notifyIdle(),
    });
  }

  /**
   * Handlers (and spent-claim lookups) running now under a lease this pool holds: the slots taken.
   * Derived from the two maps, so it cannot drift from them.
   */
  private get inflight(): number {
    return this.runningIds.size + this.lookups.size;
  }

  get active(): number {
    return this.inflight;
  }

  /**
   * Messages this pool holds and has not finished: handlers running, then claimed ones not started.
   * Not a handler still running past its lease: its message is no longer held (it may be held again,
   * as a later attempt, and is listed then).
   */
  leftIds(): string[] {
    const ids = [...this.runningIds.keys()];
    for (const m of this.buffer) ids.push(m.id);
    for (const id of this.parked.keys()) ids.push(id);
    return ids;
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    // "settled" from another holder can free work (a retry, a key's next message); "wake" is the
    // store's catch-all (poll tick, LISTEN reconnect) and names no signal.
    this.unsubscribe = this.o.store.subscribe((e) => {
      if (e.kind === "wake" || e.signal === this.o.signal.name) this.wake();
    });
    this.wake();
  }

  /**
   * Holds a slot for a message this instance is about to write already claimed
   * by this pool, or undefined when there is none to give: not running, every
   * slot taken, or claimed messages waiting in the buffer (they go first).
   */
  reserve(): SlotReservation | undefined {
    if (!this.running || this.buffer.length > 0 || this.inflight + this.reserved >= this.o.concurrency)
      return undefined;
    this.reserved++;
    let done!: () => void;
    const settled = new Promise<void>((resolve) => (done = resolve));
    this.reservations.add(settled);
    let open = true;
    const close = (): boolean => {
      if (!open) return false;
      open = false;
      this.reserved--;
      this.reservations.delete(settled);
      done();
      return true;
    };
    return {
      start: (m) => {
        if (!close()) return;
        // Once stop() stopped waiting the message is given back unstarted, like a buffered one.
        if (this.stopped) {
          this.giveBack([m], "a message claimed at emit was committed after stop");
          return;
        }
        this.armAt(m.leaseExpiresAt);
        this.run(m, this.o.clock.now());
      },
      release: () => {
        if (!close()) return;
        this.startBuffered();
        this.notifyIdle();
      },
    };
  }

  /** Re-check for work now. Coalesces: one claim loop at a time. */
  wake(): void {
    if (!this.running) return;
    this.mayHaveMore = true;
    if (this.pumping) {
      this.again = true;
      return;
    }
    this.pumpDone = this.pump();
  }

  private async pump(): Promise<void> {
    this.pumping = true;
    try {
      do {
        this.again = false;
        for (;;) {
          // A lease that ran out is anyone's to claim (this claim's included): its handler's slot is
          // freed first, so a hung handler cannot keep the room a claim needs.
          this.releaseLapsed(this.o.clock.now());
          if (!this.running || this.room() <= 0 || this.dropsSettling.size > 0) break;
          const want = this.room();
          this.roomHeld += want;
          let claimed: ClaimedMessage[];
          try {
            claimed = await this.o.store.claim({
              signal: this.o.signal.name,
              worker: this.o.worker,
              max: want,
              now: this.o.clock.now(),
              leaseMs: this.o.leaseMs,
            });
          } finally {
            this.roomHeld -= want;
          }
          // A claim sent before stop that answers after its deadline: nothing may start any more.
          if (this.stopped && claimed.length > 0) {
            this.claimedTooLate(claimed);
            break;
          }
          // Loops, not spreads: a claim as large as the room (concurrency + prefetch) must not overflow the stack.
          let earliest = Infinity;
          for (const m of claimed) {
            this.buffer.push(m);
            if (m.leaseExpiresAt < earliest) earliest = m.leaseExpiresAt;
          }
          this.mayHaveMore = claimed.length === want;
          // Our own leases need no query: the earliest one arms the timer (a hung handler is reclaimed then).
          if (claimed.length > 0) this.armAt(earliest);
          this.startBuffered();
          if (claimed.length < want) {
            break;
          }
        }
      } while (this.again && this.running);
      // Only a short claim asks the store for the next lease expiry (another holder's); querying it
      // after every round cost a serial round trip per batch on PostgreSQL.
      if (this.running && !this.mayHaveMore) await this.armLeaseTimer();
    } catch (e) {
      this.claimFailed(e, { signal: this.o.signal.name }, "claim failed; retrying on the next wake-up");
      if (this.running) this.armRetry();
    } finally {
      this.pumping = false;
      // A wake-up that arrived while the lease timer was being armed must not be lost.
      if (this.again && this.running) this.wake();
      else this.notifyIdle();
    }
  }

  /** One timer on the next lease expiry, so an abandoned message is reclaimed without polling. */
  private async armLeaseTimer(): Promise<void> {
    const next = await this.o.store.nextLeaseExpiry(this.o.signal.name);
    if (next !== null && this.running) this.armAt(next);
  }

  /**
   * Keeps the single timer on the earliest deadline seen. None after stop: it could only wake a pool
   * that claims nothing (a claim answering during stop would re-arm the timer stop() cancelled).
   */
  private armAt(at: number): void {
    if (!this.running) return;
    if (this.cancelTimer && at >= this.timerAt) return;
    this.cancelTimer?.();
    this.timerAt = at;
    this.cancelTimer = this.o.clock.at(at, () => {
      this.cancelTimer = undefined;
      this.timerAt = Infinity;
      this.wake();
    });
  }

  private armRetry(): void {
    this.cancelTimer?.();
    this.cancelTimer = undefined;
    this.armAt(this.o.clock.now() + 1_000);
  }

  /** How many more messages a claim may take: free slots plus prefetch room. */
  private room(): number {
    return (
      this.o.concurrency +
      this.prefetch -
      this.inflight -
      this.reserved -
      this.buffer.length -
      this.parked.size -
      this.roomHeld -
      this.settles.roomHeld
    );
  }

  /**
   * Starts buffered messages while slots are free; drops (and logs) those whose lease already ran out.
   * Nothing once stop() stopped waiting: a handler ending after its deadline frees a slot nobody may use.
   *
   * A message that waited until less than half its lease is left is not started either: given back
   * unstarted (attempt not counted), it is claimed again with a whole lease. Started late, a healthy
   * handler that takes over half the lease ran past it, was claimed again while still running, and
   * its reclaimed copy waited behind the buffer once more: with the default prefetch and handlers of
   * 60 % of the lease, 30 of 150 messages ended dead as "crashed", each run up to three times.
   */
  private startBuffered(): void {
    if (this.stopped) return;
    const now = this.o.clock.now();
    let dropped = false;
    let stale: ClaimedMessage[] | undefined;
    const halfLease = this.o.leaseMs / 2;
    while (this.inflight + this.reserved < this.o.concurrency && this.buffer.length > 0) {
      const m = this.buffer.shift()!;
      if (m.leaseExpiresAt <= now) {
        this.dropped(m, now);
        dropped = true;
        continue;
      }
      if (m.leaseExpiresAt - now < halfLease) {
        (stale ??= []).push(m);
        continue;
      }
      this.run(m, now);
    }
    if (stale !== undefined)
      this.giveBack(
        stale,
        `${stale.length} prefetched message(s) waited for a slot until less than half their lease (${leaseSeconds(this.o.leaseMs)}) was left (handlers take ~${Math.round(this.avgRunMs)} ms here; prefetch now ${this.prefetch})`,
      );
    // The dropped message is claimable again now: claim it rather than wait for another wake-up.
    if (dropped) this.wake();
  }

  /**
   * The prefetch that lets a full buffer drain while its messages still have lease to run, for
   * handlers taking `avgRunMs`: the last of `p` buffered messages starts after about
   * p / concurrency runs and must then have two runs' worth of lease left (room for slower ones).
   * Never above the configured prefetch; 0 (claim free slots only) once a handler takes over a third
   * of the lease.
   */
  private prefetchFor(avgRunMs: number): number {
    if (avgRunMs <= 0) return this.o.prefetch;
    const runsOfWait = (this.o.leaseMs - 2 * avgRunMs) / avgRunMs;
    if (runsOfWait <= 0) return 0;
    return Math.min(this.o.prefetch, Math.floor(this.o.concurrency * runsOfWait));
  }

  /**
   * A buffered message not started within its lease: never run late. Its claim counted as an attempt,
   * so the next claim is a new one. When it held the last attempt it is settled at once as never
   * started (SettleQueue.unstarted) rather than by the next claim, whose spent-claim text would blame
   * a crash. A durable consumer's is settled at once too, with what its run says (whenSpent with the
   * never-started failure): an earlier attempt may have started one.
   */
  private dropped(m: ClaimedMessage, now: number): void {
    const s = this.o.signal;
    const last = m.attempts === s.retries + 1;
    const settledAs = `${s.deadLetter ? "dead" : "delivered"} (${LEASE_EXPIRED}, never started)`;
    let next: string;
    if (last && this.o.whenSpent === undefined) {
      this.dropsSettling.add(m.id);
      this.settles.unstarted(m);
      next = `it held its last attempt (${s.retries + 1}), so it is settled ${settledAs} without running it`;
    } else if (last) {
      this.droppedDurable(m);
      next = `it held its last attempt (${s.retries + 1}), so it is settled without running it: with its run, or ${settledAs} when it has none`;
    } else if (budgetSpent({ attempts: m.attempts + 1 }, s)) {
      next = `its next claim finds its ${s.retries + 1} attempt(s) spent and settles it (${LEASE_EXPIRED}) without running it`;
    } else {
      next = `it is claimable again now and runs as attempt ${m.attempts + 1}`;
    }
    this.o.logger.warn(
      { signal: s.name, messageId: m.id, attempt: m.attempts, lateMs: now - m.leaseExpiresAt },
      `buffered message dropped: its lease (${leaseSeconds(this.o.leaseMs)}) ran out before a slot freed up; ${next}`,
    );
  }

  /**
   * A durable consumer's last attempt dropped unrun: settled now, under the claim it still holds,
   * with what its run says; the never-started failure when it has none (or the lookup fails, as for
   * a spent claim). Claims wait for it (dropsSettling) like for a plain drop's settle; a run another
   * instance holds leaves the message to its lease, so nothing is settled and claims go on.
   */
  private droppedDurable(m: ClaimedMessage): void {
    this.dropsSettling.add(m.id);
    const unstarted = unstartedFailure(this.o.signal, m.attempts, this.o.leaseMs);
    this.settleWithRun(m, unstarted, "dropped last attempt: run lookup failed", (outcome) => {
      if (outcome === undefined) return this.settles.unstarted(m);
      this.settles.outcome(m, outcome);
      if (outcome.kind === "abandon" && this.dropsSettling.delete(m.id) && this.dropsSettling.size === 0)
        this.wake();
    });
  }

  /**
   * A durable consumer's message whose attempts are spent (a claim past the budget, or its last
   * attempt dropped unrun: `unstarted`) is settled with what its run says (whenSpent). `settle` gets
   * `undefined` when there is no run or the lookup failed (logged as `lookupFailed`). Counts as a
   * handler in flight, so stop() waits for it — until its lease runs out, like a handler's (release()).
   */
  private settleWithRun(
    m: ClaimedMessage,
    unstarted: { code: string; message: string } | undefined,
    lookupFailed: string,
    settle: (outcome: HandlerOutcome | undefined) => void,
  ): void {
    this.hold(this.lookups, m);
    let busy = false;
    void (this.o.whenSpent?.(m, unstarted) ?? Promise.resolve(undefined))
      .catch((e: unknown): HandlerOutcome | undefined => {
        this.o.logger.warn({ signal: this.o.signal.name, messageId: m.id, err: e }, lookupFailed);
        return undefined;
      })
      .then((outcome) => {
        busy = outcome?.kind === "abandon";
        settle(outcome);
      })
      .finally(() => {
        const behind = this.behindLate.size > 0 && this.behindLate.delete(m);
        if (!this.unhold(this.lookups, m)) return;
        this.ended();
        if (behind && busy) this.retryBehind(m);
        this.startBuffered();
      });
  }

  private run(m: ClaimedMessage, startedAt: number): void {
    if (budgetSpent(m, this.o.signal)) {
      if (this.o.whenSpent === undefined) {
        this.settles.spent(m);
        return;
      }
      this.settleWithRun(m, undefined, "spent claim: run lookup failed", (outcome) =>
        outcome === undefined ? this.settles.spent(m) : this.settles.outcome(m, outcome),
      );
      return;
    }
    this.hold(this.runningIds, m);
    // A promise chain, not an async function: an async frame and its awaits were ~450 B of garbage
    // per message (bench/s3-rounds.ts --alloc-profile), the two closures here ~100 B.
    let outcome: Promise<HandlerOutcome>;
    try {
      outcome = this.o.handle(m);
    } catch (e) {
      // A handler that threw before returning a promise: go on on a later tick, like the rest.
      outcome = Promise.resolve(thrown(e));
    }
    void outcome.then(
      (o) => this.finish(m, o, startedAt),
      (e: unknown) => this.finish(m, thrown(e), startedAt),
    );
  }

  /**
   * A handler's outcome is in: queue its settlement, free the slot, start or claim more. The
   * settlement of a handler released past its lease is queued too (it applies when nobody claimed
   * the message since; otherwise the store fences it off, logged by settled()), but its slot was
   * freed then: nothing else changes.
   */
  private finish(m: ClaimedMessage, outcome: HandlerOutcome, startedAt: number): void {
    // One fifth of each new run (the first sets it): a few slow handlers move it, one does not.
    const ranMs = this.o.clock.now() - startedAt;
    this.avgRunMs = this.avgRunMs === 0 ? ranMs : this.avgRunMs + (ranMs - this.avgRunMs) * 0.2;
    this.prefetch = this.prefetchFor(this.avgRunMs);
    try {
      this.settles.outcome(m, outcome);
    } finally {
      const behind = this.behindLate.size > 0 && this.behindLate.delete(m);
      if (this.unhold(this.runningIds, m)) {
        this.ended();
        if (behind && outcome.kind === "abandon") this.retryBehind(m);
        this.startBuffered();
        // Claim again once the local buffer is half empty, so claims stay batched.
        if (this.mayHaveMore && this.buffer.length <= this.prefetch / 2) this.wake();
      }
    }
  }

  /**
   * Counts a handler or lookup of `m` against the slots (`inflight` is the maps' size) until it ends
   * or its lease runs out. An earlier attempt of the same message still counted has lost its lease
   * (the store handed the message out again), so it is released first: one entry per message, and
   * each entry leaves its map once, by its end or by its release.
   */
  private hold(map: Map<string, ClaimedMessage>, m: ClaimedMessage): void {
    const earlier =
      this.runningIds.get(m.id) ?? (this.lookups.size === 0 ? undefined : this.lookups.get(m.id));
    if (earlier !== undefined) this.release(earlier, this.o.clock.now());
    map.set(m.id, m);
    // A claim of it still parked lapsed (the store handed the message out again): this one replaces it.
    if (this.parked.size > 0) this.parked.delete(m.id);
    if (this.pastLeaseIds.size > 0 && this.o.whenSpent !== undefined && this.pastLeaseIds.has(m.id))
      this.behindLate.add(m);
    if (m.leaseExpiresAt < this.lapseAt && this.lapses(m)) {
      this.lapseAt = m.leaseExpiresAt;
      if (this.running) this.armAt(m.leaseExpiresAt);
    }
  }

  /** `m` ended: true when it still held its slot, false when it had been released past its lease. */
  private unhold(map: Map<string, ClaimedMessage>, m: ClaimedMessage): boolean {
    if (map.get(m.id) === m) {
      map.delete(m.id);
      return true;
    }
    this.endedLate(m);
    return false;
  }

  /** A released attempt ended at last: a claim parked behind it goes to the front of the buffer. */
  private endedLate(m: ClaimedMessage): void {
    this.pastLease.delete(m);
    const n = this.pastLeaseIds.get(m.id)! - 1;
    if (n > 0) {
      this.pastLeaseIds.set(m.id, n);
      return;
    }
    this.pastLeaseIds.delete(m.id);
    const next = this.parked.get(m.id);
    if (next === undefined) return;
    this.parked.delete(m.id);
    if (this.askAgain(next)) this.startBuffered();
  }

  /**
   * A durable consumer's claim found its run busy (abandon) while this instance's own late attempt
   * of the message ran, which may hold the run: asked again once that attempt has ended (at once
   * when it has ended already), under the same claim, instead of a lease later. Parked meanwhile.
   */
  private retryBehind(m: ClaimedMessage): void {
    if (!this.pastLeaseIds.has(m.id)) {
      this.askAgain(m);
      return;
    }
    this.parked.set(m.id, m);
    if (m.leaseExpiresAt < this.lapseAt) {
      this.lapseAt = m.leaseExpiresAt;
      if (this.running) this.armAt(m.leaseExpiresAt);
    }
  }

  /** Puts a claim that found its run busy back at the front of the buffer while its lease holds. */
  private askAgain(m: ClaimedMessage): boolean {
    // After stop() it is left to lazy reclaim, like a buffered message; a lapsed one to its next claim.
    if (this.stopped || m.leaseExpiresAt <= this.o.clock.now()) return false;
    this.buffer.unshift(m);
    this.o.logger.info(
      { signal: this.o.signal.name, messageId: m.id, attempt: m.attempts },
      `attempt ${m.attempts} runs again: this instance's earlier attempt, which held its run past its lease, has ended`,
    );
    return true;
  }

  /**
   * Releases every handler and lookup whose lease ran out while it ran (its message can be claimed
   * by anyone now, so this instance no longer holds it), starts buffered messages in the freed
   * slots, and keeps the timer on the next lease a running one holds: without it a pool whose slots
   * were all taken by hung handlers never claimed again, and its buffer never started.
   */
  private releaseLapsed(now: number): void {
    if (now >= this.lapseAt) {
      let next = Infinity;
      let freed = false;
      for (const map of [this.runningIds, this.lookups]) {
        for (const m of map.values()) {
          if (!this.lapses(m)) continue;
          if (m.leaseExpiresAt <= now) {
            this.release(m, now);
            freed = true;
          } else if (m.leaseExpiresAt < next) next = m.leaseExpiresAt;
        }
      }
      for (const m of this.parked.values()) {
        if (m.leaseExpiresAt > now) {
          if (m.leaseExpiresAt < next) next = m.leaseExpiresAt;
          continue;
        }
        // Its abandon line said it: the message is claimed again now that the lease lapsed.
        this.parked.delete(m.id);
        freed = true;
      }
      this.lapseAt = next;
      if (freed) this.startBuffered();
    }
    if (this.running && this.lapseAt < Infinity) this.armAt(this.lapseAt);
  }

  /**
   * False for the one thing the pool runs past its lease on purpose: the run lookup of a last attempt
   * dropped from the buffer (droppedDurable), settled under that lapsed claim while claims wait for it
   * (dropsSettling). Every handler, and the lookup of a spent claim, is released when its lease runs out.
   */
  private lapses(m: ClaimedMessage): boolean {
    return this.runningIds.get(m.id) === m || budgetSpent(m, this.o.signal);
  }

  /**
   * One running handler or lookup whose lease ran out: its slot is freed (it no longer counts in
   * `inflight`), it is kept in pastLease until it ends, and the line says what comes next.
   */
  private release(m: ClaimedMessage, now: number): void {
    const handler = this.runningIds.get(m.id) === m;
    (handler ? this.runningIds : this.lookups).delete(m.id);
    this.pastLease.add(m);
    this.pastLeaseIds.set(m.id, (this.pastLeaseIds.get(m.id) ?? 0) + 1);
    const s = this.o.signal;
    const settledAs = `${s.deadLetter ? "dead" : "delivered"} (${LEASE_EXPIRED})`;
    let next: string;
    if (!handler) {
      next = "that claim asks its run again";
    } else if (!budgetSpent({ attempts: m.attempts + 1 }, s)) {
      next = `it runs as attempt ${m.attempts + 1}`;
    } else if (this.o.whenSpent === undefined) {
      next = `its ${s.retries + 1} attempt(s) are spent, so that claim settles it ${settledAs} without running it`;
    } else if (this.o.whenSpentSays !== undefined) {
      next = `its ${s.retries + 1} attempt(s) are spent, so ${this.o.whenSpentSays}`;
    } else {
      next = `its ${s.retries + 1} attempt(s) are spent, so that claim settles it with its run, or ${settledAs} when it has none`;
    }
    // A plain handler has no way to keep its lease: say where longer work belongs.
    if (handler && this.o.whenSpent === undefined)
      next += `. Work longer than the lease belongs in a durable flow (each step renews its lease) or needs a longer signals.leaseMs`;
    // A durable consumer's claim here that finds the run busy (this one may hold it) waits for it.
    if (this.o.whenSpent !== undefined && this.o.whenSpentSays === undefined)
      next += `; should that claim find its run busy, it runs again here once this ${handler ? "attempt" : "lookup"} has ended`;
    this.o.logger.warn(
      { signal: s.name, messageId: m.id, attempt: m.attempts, lateMs: Math.max(0, now - m.leaseExpiresAt) },
      `${handler ? "handler" : "run lookup of a spent claim"} still running after its lease (${leaseSeconds(this.o.leaseMs)}) ran out; ` +
        `its slot is freed and the message will be claimed again: ${next}`,
    );
    this.ended();
  }

  /** A handler (or spent-claim lookup) ended or was released; wakes stop() once none is left. */
  private ended(): void {
    // Nothing left to lapse: no stale lease arms the timer (a lower bound, see lapseAt).
    if (this.inflight === 0 && this.parked.size === 0) this.lapseAt = Infinity;
    if (this.inflight > 0 || this.quietWaiters.length === 0) return;
    const waiters = this.quietWaiters;
    this.quietWaiters = [];
    for (const w of waiters) w();
  }

  /**
   * At the stop deadline, the claims whose handlers still run here (and the claims parked behind an
   * earlier attempt) are marked as a graceful stop's (Store.leaveClaimsToLease): still nobody's to
   * claim before their lease lapses — the handler may run on until the process exits — but the claim
   * after the lapse is the same attempt, not the next. Without this a handler longer than
   * shutdownTimeoutMs spent one attempt per deploy and, a few deploys on, ended dead as "crashed".
   * A late outcome settles under the mark's fence (SettleQueue.leave). Best effort and bounded:
   * unmarked (no such store call, an outage, no answer in STOP_MARK_TIMEOUT_MS), each claim after the
   * lapse counts an attempt, as a crash's does. Resolves with the ids marked.
   */
  private async leaveRunning(): Promise<ReadonlySet<string>> {
    const { store, clock, logger } = this.o;
    const now = clock.now();
    const ms = [...this.runningIds.values(), ...this.parked.values()].filter((m) => m.leaseExpiresAt > now);
    if (store.leaveClaimsToLease === undefined || ms.length === 0 || this.o.cutAtStop === "spent")
      return new Set();
    const messageIds = ms.map((m) => m.id);
    const marked = markWithin(
      store.leaveClaimsToLease(
        ms.map((m) => ({ id: m.id, worker: m.lockedBy, attempt: m.attempts })),
        now,
      ),
    ).then(
      (ids): ReadonlySet<string> => {
        if (ids !== "late") return new Set(ids);
        logger.warn(
          { signal: this.o.signal.name, messageIds },
          `shutdown deadline: the store did not mark the messages still running within ${STOP_MARK_TIMEOUT_MS} ms; each one's next claim counts an attempt`,
        );
        return new Set();
      },
      (err: unknown): ReadonlySet<string> => {
        logger.warn(
          { signal: this.o.signal.name, messageIds, err },
          "shutdown deadline: marking the messages still running failed; each one's next claim counts an attempt",
        );
        return new Set();
      },
    );
    this.settles.leave(ms, marked);
    return marked;
  }

  /**
   * Messages a claim in flight at stop brought back after stop() stopped waiting: not run (stop has
   * returned), and given back unstarted, so any instance claims them at once as the same attempt.
   */
  private claimedTooLate(claimed: readonly ClaimedMessage[]): void {
    this.giveBack(claimed, `a claim sent before stop answered after it with ${claimed.length} message(s)`);
  }

  /**
   * Gives back, in one store call, claims this pool will not start (stopping): each goes back to
   * pending as if never claimed (Store.releaseClaimed), so another instance claims it at once as the
   * same attempt — not after its lease, as the next one: a last attempt left to its lease came back
   * spent and was settled as crashed without its handler ever running. One the pool no longer holds
   * (its lease lapsed and it was claimed again) is left as it is. A failure leaves them to their
   * lease. Logged at warn either way, with the ids; stop() waits for those it sent.
   */
  private giveBack(ms: readonly ClaimedMessage[], what: string): void {
    if (ms.length === 0) return;
    const signal = this.o.signal.name;
    const messageIds = ms.map((m) => m.id);
    const lease = leaseSeconds(this.o.leaseMs);
    const done = (async () => {
      const claims = ms.map((m) => ({ id: m.id, worker: m.lockedBy, attempt: m.attempts }));
      return this.o.store.releaseClaimed(claims, this.o.clock.now());
    })()
      .then(
        (released) => {
          const back = new Set(released);
          const notHeld = messageIds.filter((id) => !back.has(id));
          this.o.logger.warn(
            { signal, messageIds, ...(notHeld.length > 0 ? { notHeld } : {}) },
            `${what}: not run here; given back unstarted, so they are claimed at once, their attempt not counted` +
              (notHeld.length > 0
                ? ` (${notHeld.length} no longer held here, their lease having lapsed, were left as they are)`
                : ""),
          );
        },
        (err: unknown) => {
          this.o.logger.warn(
            { signal, messageIds, err },
            `${what}: not run here; giving them back failed, so they are claimed again once their lease (${lease}) lapses`,
          );
        },
      )
      .finally(() => this.givingBack.delete(done));
    this.givingBack.add(done);
  }

  /** A settle returned: start what it handed off, warn about fenced settlements, claim when it freed work. */
  private settled({ batch, sent, keyed, frees }: SettledBatch): void {
    // Claims waited for dropped last attempts' settles (committed or given up): claim again.
    let resume = false;
    if (this.dropsSettling.size > 0) {
      for (const b of batch) this.dropsSettling.delete(b.id);
      resume = this.dropsSettling.size === 0;
    }
    if (sent === undefined) {
      if (resume) this.wake();
      return;
    }
    const { settled, result: r } = sent;
    const handed = r.claimed ?? [];
    if (handed.length > 0 && this.stopped) {
      // Handed off by a settle sent before stop: nothing starts them now, so they go back at once.
      this.giveBack(
        handed,
        `a settle sent before stop handed this pool ${handed.length} message(s) after it`,
      );
    } else if (handed.length > 0) {
      // During stop's wait, its loop starts them as slots free up (startBuffered).
      let earliest = Infinity;
      for (const m of handed) {
        this.buffer.push(m);
        if (m.leaseExpiresAt < earliest) earliest = m.leaseExpiresAt;
      }
      if (this.running) {
        this.armAt(earliest);
        this.startBuffered();
      }
      // Every settled key found its next message: nothing was freed for a claim to find.
      if (handed.length >= keyed && !batch.some((b) => b.status === "pending")) frees = false;
    }
    if (r.applied.length < settled.length) {
      const applied = new Set(r.applied);
      const fenced = settled.filter((b) => !applied.has(b.id)).map((b) => b.id);
      this.o.logger.warn(
        { signal: this.o.signal.name, fenced },
        "settle ignored: the lease was reclaimed by another holder",
      );
    }
    // A retry is claimable again right away, and a settled key head frees its successor. Otherwise a
    // claim waits until the buffer is half empty, as in finish(): a settle frees no slot (the
    // handler's end did), and claiming after every settle made claims of a handful of messages —
    // at concurrency 1 one claim per message. While the buffer holds more, handlers are running
    // and the last of them to find it half empty claims.
    const refill = this.buffer.length <= this.prefetch / 2;
    if ((this.mayHaveMore && refill) || frees || resume) this.wake();
  }

  /** True when nothing runs, nothing waits to settle, and the last claim found the queue drained. */
  isIdle(): boolean {
    return (
      !this.pumping &&
      this.inflight === 0 &&
      this.reserved === 0 &&
      this.buffer.length === 0 &&
      this.parked.size === 0 &&
      this.settles.empty &&
      !this.mayHaveMore
    );
  }

  /** Resolves the next time the pool turns idle (or at once). */
  whenIdle(): Promise<void> {
    if (this.isIdle() || !this.running) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private notifyIdle(): void {
    if (!this.isIdle()) return;
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const w of waiters) w();
  }

  /**
   * Stop claiming; wait for handlers up to `timeoutMs`; give back claimed messages not started; flush
   * settlements. Handlers still running stay leased (lazy reclaim).
   */
  async stop(timeoutMs: number): Promise<void> {
    if (!this.running) return;
    this.running = false;
    this.unsubscribe?.();
    this.cancelTimer?.();
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, timeoutMs);
      timer.unref();
    });
    // A claim already sent may still return messages: they are ours and run as in-flight work,
    // like buffered ones, using the attempt their claim counted. Only until the deadline: after it
    // they are given back unstarted (claimedTooLate), like the buffer.
    const drained = (async () => {
      await this.pumpDone;
      // Emits writing a message claimed for us: it is ours to run once their commit returns.
      await Promise.allSettled([...this.reservations]);
      for (;;) {
        this.startBuffered();
        if (this.inflight === 0) return;
        await new Promise<void>((resolve) => this.quietWaiters.push(resolve));
      }
    })();
    await Promise.race([drained, deadline]);
    clearTimeout(timer);
    // From here on nothing starts: a handler ending late, or the claim in flight answering, would
    // otherwise start messages after stop() returned (after the app logged that it stopped).
    this.stopped = true;
    // Claimed, not started, and nothing will start them: given back, claimable at once elsewhere as
    // the same attempt (in parallel with the settles below).
    this.giveBack(
      this.buffer.splice(0),
      "shutdown deadline: buffered message(s) claimed ahead of a free slot were not started",
    );
    // Handlers still running: marked as a graceful stop's, in parallel with the settles below.
    const leaving = this.leaveRunning();
    // Settles still retrying against an unavailable store get as long again, then are given up (logged).
    const abortSettles = setTimeout(() => this.settles.giveUp(), timeoutMs);
    abortSettles.unref();
    await this.settles.drain();
    clearTimeout(abortSettles);
    // A handler that ends after this still has its outcome sent, once: no retries after stop (the
    // store may be closing), so a failed one is given up, logged, and its message reclaimed.
    this.settles.giveUp();
    // One call each, no retry: a give-back the store does not answer holds stop() like a settle would.
    while (this.givingBack.size > 0) await Promise.all([...this.givingBack]);
    const marked = await leaving;
    const left = this.inflight + this.buffer.length + this.parked.size;
    // Of those left, the ones the mark covers: a marked handler that ended meanwhile is not left.
    const leftIds = this.leftIds();
    const counted = marked.size === 0 ? 0 : leftIds.filter((id) => marked.has(id)).length;
    if (left > 0)
      this.o.logger.warn(
        { signal: this.o.signal.name, left, messageIds: leftIds },
        `shutdown deadline: leaving ${left} message(s) still running (or waiting for their run) to lazy reclaim after their lease (${leaseSeconds(this.o.leaseMs)})` +
          (counted === 0
            ? ""
            : `; ${counted === left ? "their" : `${counted} of them have their`} attempt not counted (a graceful stop is not a crash)`),
      );
    // Not waited for: released when their lease ran out, each logged then.
    if (this.pastLease.size > 0)
      this.o.logger.warn(
        { signal: this.o.signal.name, pastLease: [...this.pastLease].map((m) => `${m.id}#${m.attempts}`) },
        `stopped with ${this.pastLease.size} handler(s) still running after their lease ran out; their slots were freed then, and their messages were already anyone's to claim`,
      );
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const w of waiters) w();
  }
}
