/** WorkerPool: the claim → run → settle loop of one once-bound flow, with prefetch and batched settles. */
import type { Clock } from "../clock/clock.ts";
import type { Logger } from "../log/logger.ts";
import { commitWithRetry } from "../store/commit-retry.ts";
import type {
  ClaimedMessage,
  FailureReason,
  Settlement,
  SettleHandoff,
  SettleResult,
  Store,
} from "../store/types.ts";
import type { OnceSignal } from "./signal.ts";
import { budgetSpent, LEASE_EXPIRED, spentSettlement } from "./attempt-budget.ts";

const SETTLE_BATCH = 256;
const SETTLE_PARALLEL = 2;

/** What running one claimed message came to. `abandon` leaves it inflight for lazy reclaim. */
export type HandlerOutcome =
  { kind: "ok" } | { kind: "error"; failure: Omit<FailureReason, "at" | "attempt"> } | { kind: "abandon" };

export interface WorkerPoolOptions {
  store: Store;
  clock: Clock;
  logger: Logger;
  signal: OnceSignal;
  /** Holder id stamped into lockedBy. */
  worker: string;
  concurrency: number;
  /**
   * Messages claimed ahead of free slots and kept locally, so one claim round
   * trip feeds many handlers. A buffered message whose lease ran out before a
   * slot freed up is dropped (it will be reclaimed), never run late.
   */
  prefetch: number;
  leaseMs: number;
  /**
   * Settle hand-off (Store.settle's SettleHandoff): a keyed message that settles
   * for good claims its key's next message in the settle statement. Off by
   * default: on PostgreSQL it halves the statements of a keyed drain (1 000 keys
   * × 50: 0.015 → 0.007 per job) but, measured interleaved on the shared 2-core
   * box, the drain took 10-11.5 s instead of 5-6 s: the settle with hand-off
   * cost ~40 ms per ~125 rows against ~8 ms per settle plus ~17 ms per claim
   * of ~230 rows (bench/pg-costs.ts s5, bench/README.md).
   */
  handoff?: boolean;
  handle(message: ClaimedMessage): Promise<HandlerOutcome>;
  /**
   * Asked when a claim finds the attempt budget spent, before the message is dead-lettered with
   * LEASE_EXPIRED: an outcome settles it like a handler's (a durable consumer's run decides), and
   * `undefined` keeps the LEASE_EXPIRED settlement.
   */
  whenSpent?(message: ClaimedMessage): Promise<HandlerOutcome | undefined>;
}

/** A slot held for a message being written already claimed (claim at emit). */
export interface SlotReservation {
  /** The write committed: run the message in the held slot. */
  start(message: ClaimedMessage): void;
  /** The write failed: give the slot back. */
  release(): void;
}

/**
 * Delivery loop for one once-bound flow: wait for a wake-up or the next lease
 * expiry (one timer, never a polling loop), claim up to the free slots, run
 * handlers, settle in batches. Stopping stops claiming, waits for in-flight
 * handlers up to a deadline, and leaves the rest to lazy reclaim.
 */
export class WorkerPool {
  private running = false;
  private pumping = false;
  /** The claim loop in progress, so stop() can wait for a claim already sent. */
  private pumpDone: Promise<void> | undefined;
  private again = false;
  private readonly inflight = new Set<Promise<void>>();
  /** Ids of the messages whose handlers run now (what a stop leaves behind). */
  private readonly runningIds = new Set<string>();
  /** Claimed, not started yet (prefetch). */
  private buffer: ClaimedMessage[] = [];
  private pendingSettle: Settlement[] = [];
  /** Ids in pendingSettle whose settle makes other work claimable: a retry, or a key's head. */
  private readonly freeing = new Set<string>();
  /** Ids in pendingSettle of keyed messages that settle for good: their key's next can be handed off. */
  private readonly keyedDone = new Set<string>();
  /** Room promised to claims and hand-offs in flight, so the two never take the same room twice. */
  private roomHeld = 0;
  /** Settle statements in flight (at most SETTLE_PARALLEL). */
  private readonly settling = new Set<Promise<void>>();
  /** Lease expiry of each message waiting to settle: a retried settle gives up a lease after it ran out. */
  private readonly leaseUntil = new Map<Settlement, number>();
  /** Ends settle retries at the shutdown deadline. */
  private readonly settleAbort = new AbortController();
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
  private stopped = false;

  constructor(private readonly o: WorkerPoolOptions) {}

  get active(): number {
    return this.inflight.size;
  }

  /** Messages this pool holds and has not finished: handlers running, then claimed ones not started. */
  leftIds(): string[] {
    const ids = [...this.runningIds];
    for (const m of this.buffer) ids.push(m.id);
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
    if (!this.running || this.buffer.length > 0 || this.inflight.size + this.reserved >= this.o.concurrency)
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
        // After stop() finished the message is left to lazy reclaim, like any unfinished claim.
        if (this.stopped) return;
        this.armAt(m.leaseExpiresAt);
        this.run(m);
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
        while (this.running && this.room() > 0) {
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
      this.o.logger.error(
        { err: e, signal: this.o.signal.name },
        "claim failed; retrying on the next wake-up",
      );
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

  /** Keeps the single timer on the earliest deadline seen. */
  private armAt(at: number): void {
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
      this.o.prefetch -
      this.inflight.size -
      this.reserved -
      this.buffer.length -
      this.roomHeld
    );
  }

  /** Starts buffered messages while slots are free; drops those whose lease already ran out. */
  private startBuffered(): void {
    const now = this.o.clock.now();
    while (this.inflight.size + this.reserved < this.o.concurrency && this.buffer.length > 0) {
      const m = this.buffer.shift()!;
      if (m.leaseExpiresAt <= now) continue;
      this.run(m);
    }
  }

  private run(m: ClaimedMessage): void {
    if (budgetSpent(m, this.o.signal)) {
      if (this.o.whenSpent === undefined) {
        this.settleSpent(m);
        return;
      }
      const spent = this.o
        .whenSpent(m)
        .catch((e: unknown): HandlerOutcome | undefined => {
          this.o.logger.warn(
            { signal: this.o.signal.name, messageId: m.id, err: e },
            "spent claim: run lookup failed",
          );
          return undefined;
        })
        .then((outcome) => (outcome === undefined ? this.settleSpent(m) : this.settleLater(m, outcome)))
        .finally(() => {
          this.inflight.delete(spent);
          this.startBuffered();
        });
      this.inflight.add(spent);
      return;
    }
    this.runningIds.add(m.id);
    const p = this.o
      .handle(m)
      .catch((e: unknown): HandlerOutcome => ({
        kind: "error",
        failure: { code: "Error", message: String(e) },
      }))
      .then((outcome) => this.settleLater(m, outcome))
      .finally(() => {
        this.inflight.delete(p);
        this.runningIds.delete(m.id);
        this.startBuffered();
        // Claim again once the local buffer is half empty, so claims stay batched.
        if (this.mayHaveMore && this.buffer.length <= this.o.prefetch / 2) this.wake();
      });
    this.inflight.add(p);
  }

  private settleLater(m: ClaimedMessage, outcome: HandlerOutcome): void {
    if (outcome.kind === "abandon") return;
    const s = this.o.signal;
    let settlement: Settlement;
    if (outcome.kind === "ok") {
      settlement = { id: m.id, worker: this.o.worker, attempt: m.attempts, status: "delivered" };
    } else {
      const failure: FailureReason = { ...outcome.failure, at: this.o.clock.now(), attempt: m.attempts };
      const exhausted = m.attempts > s.retries;
      settlement = {
        id: m.id,
        worker: this.o.worker,
        attempt: m.attempts,
        status: exhausted ? (s.deadLetter ? "dead" : "delivered") : "pending",
        failure,
      };
      this.o.logger.warn(
        {
          signal: s.name,
          messageId: m.id,
          attempt: m.attempts,
          code: failure.code,
          outcome: settlement.status,
        },
        `attempt ${m.attempts} failed: ${failure.message}`,
      );
    }
    this.pendingSettle.push(settlement);
    this.leaseUntil.set(settlement, m.leaseExpiresAt);
    if (settlement.status === "pending" || m.key !== null) this.freeing.add(m.id);
    if (this.o.handoff === true && settlement.status !== "pending" && m.key !== null)
      this.holdForHandoff(m.id);
    this.flushSettle();
  }

  /**
   * A claim is an attempt: this one found every allowed attempt already made
   * (the last one crashed or hung past its lease), so it settles the message
   * without running it again and `retries + 1` invocations holds.
   */
  private settleSpent(m: ClaimedMessage): void {
    const s = this.o.signal;
    const settlement = spentSettlement(m, s, this.o.worker, this.o.clock.now());
    this.o.logger.warn(
      {
        signal: s.name,
        messageId: m.id,
        attempt: settlement.failure!.attempt,
        code: LEASE_EXPIRED,
        outcome: settlement.status,
      },
      settlement.failure!.message,
    );
    this.pendingSettle.push(settlement);
    this.leaseUntil.set(settlement, m.leaseExpiresAt);
    if (m.key !== null) this.freeing.add(m.id);
    if (this.o.handoff === true && m.key !== null && settlement.status !== "pending")
      this.holdForHandoff(m.id);
    this.flushSettle();
  }

  /**
   * Settlements that finish while a settle is in flight go out together in the
   * next batch. A second statement goes out in parallel only for a backlog of
   * at least half a batch: settling is the slower half of a drain on PostgreSQL
   * (each row is rewritten), and one statement at a time left a tail of
   * unsettled messages after the last handler (bench/README.md).
   */
  private flushSettle(): void {
    while (
      this.pendingSettle.length > 0 &&
      (this.settling.size === 0 ||
        (this.settling.size < SETTLE_PARALLEL && this.pendingSettle.length >= SETTLE_BATCH / 2))
    ) {
      this.settleBatch(this.pendingSettle.splice(0, SETTLE_BATCH));
    }
  }

  /**
   * A keyed message that settles for good keeps its room for its key's next
   * message until its settle returns: the settle claims that message in the same
   * statement (Store.settle's hand-off), so a keyed drain needs no claim
   * statement per key. Held from the handler's end, not from the settle's send:
   * a claim sent in between would otherwise take the room first.
   */
  private holdForHandoff(id: string): void {
    if (this.keyedDone.has(id)) return;
    this.keyedDone.add(id);
    this.roomHeld++;
  }

  /** Settles one batch; hands off the room held for its keyed messages (holdForHandoff) while running. */
  private settleBatch(batch: Settlement[]): void {
    let frees = false;
    let keyed = 0;
    for (const b of batch) {
      frees = this.freeing.delete(b.id) || frees;
      if (this.keyedDone.delete(b.id)) keyed++;
    }
    // After stop() nothing would start a handed message.
    const max = this.running ? keyed : 0;
    const handoff: SettleHandoff | undefined =
      max > 0 ? { worker: this.o.worker, leaseMs: this.o.leaseMs, max } : undefined;
    let held = keyed;
    const release = (): void => {
      this.roomHeld -= held;
      held = 0;
    };
    const done: Promise<void> = this.settleUntilCommitted(batch, handoff)
      .then((sent) => {
        release();
        if (sent === undefined) return;
        const { settled, result: r } = sent;
        const handed = r.claimed ?? [];
        if (handed.length > 0) {
          // After stop() they are left to lazy reclaim, like buffered messages stop() did not start.
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
        // A retry is claimable again right away, and a settled key head frees its successor. After a
        // hand-off refilled the buffer, a claim waits until the buffer is half empty (as in run()).
        const refill = handed.length === 0 || this.buffer.length <= this.o.prefetch / 2;
        if ((this.mayHaveMore && refill) || frees) this.wake();
      })
      .finally(() => {
        release();
        this.settling.delete(done);
        this.flushSettle();
        this.notifyIdle();
      });
    this.settling.add(done);
  }

  /**
   * A failed settle is retried with backoff (the store fences it by holder and
   * attempt, so a retry never applies twice) until it commits, the pool stops,
   * or a message's lease ran out a whole lease ago: by then it is another
   * holder's to run, so it is given up and logged. Dropping it at the first
   * failure re-ran every handler of the batch after a short database blip.
   */
  private async settleUntilCommitted(
    batch: Settlement[],
    handoff?: SettleHandoff,
  ): Promise<{ settled: Settlement[]; result: SettleResult } | undefined> {
    const name = this.o.signal.name;
    let live = batch;
    const r = await commitWithRetry(() => this.o.store.settle(live, this.o.clock.now(), handoff), {
      signal: this.settleAbort.signal,
      giveUp: () => {
        const now = this.o.clock.now();
        const lost = live.filter((b) => (this.leaseUntil.get(b) ?? 0) + this.o.leaseMs <= now);
        if (lost.length > 0) {
          this.o.logger.error(
            { signal: name, gaveUp: lost.map((b) => ({ id: b.id, status: b.status })) },
            `settle of ${lost.length} message(s) given up: their lease ran out while the store was unavailable; they run again`,
          );
          live = live.filter((b) => !lost.includes(b));
        }
        return live.length === 0 ? "every lease ran out" : undefined;
      },
      onRetry: (err, attempt, delayMs) =>
        this.o.logger.warn(
          { err, signal: name, messages: live.length, attempt, retryInMs: delayMs },
          "settle failed; retrying",
        ),
    });
    for (const b of batch) this.leaseUntil.delete(b);
    if (r.ok) return { settled: live, result: r.value };
    if (live.length > 0)
      this.o.logger.error(
        { err: r.error, signal: name, gaveUp: live.map((b) => ({ id: b.id, status: b.status })) },
        `settle of ${live.length} message(s) given up (${r.reason}): they are reclaimed after their lease and run again`,
      );
    return undefined;
  }

  /** True when nothing runs, nothing waits to settle, and the last claim found the queue drained. */
  isIdle(): boolean {
    return (
      !this.pumping &&
      this.inflight.size === 0 &&
      this.reserved === 0 &&
      this.buffer.length === 0 &&
      this.settling.size === 0 &&
      this.pendingSettle.length === 0 &&
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

  /** Stop claiming; wait for handlers up to `timeoutMs`; flush settlements. Unfinished messages stay leased. */
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
    // like buffered ones.
    const drained = (async () => {
      await this.pumpDone;
      // Emits writing a message claimed for us: it is ours to run once their commit returns.
      await Promise.allSettled([...this.reservations]);
      for (;;) {
        this.startBuffered();
        if (this.inflight.size === 0) return;
        await Promise.allSettled([...this.inflight]);
      }
    })();
    await Promise.race([drained, deadline]);
    clearTimeout(timer);
    // Settles still retrying against an unavailable store get as long again, then are given up (logged).
    const abortSettles = setTimeout(() => this.settleAbort.abort(), timeoutMs);
    abortSettles.unref();
    while (this.settling.size > 0 || this.pendingSettle.length > 0) {
      this.flushSettle();
      await Promise.all([...this.settling]);
    }
    clearTimeout(abortSettles);
    this.stopped = true;
    const left = this.inflight.size + this.buffer.length;
    if (left > 0)
      this.o.logger.warn(
        { signal: this.o.signal.name, left },
        "shutdown deadline: leaving in-flight messages to lazy reclaim",
      );
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const w of waiters) w();
  }
}
