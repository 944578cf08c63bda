/** The worker pool's settle side: handler outcomes to settlements, batched settles with retry and the keyed hand-off. */
import type { Clock } from "../clock/clock.ts";
import type { Logger } from "../log/logger.ts";
import { commitWithRetry, unlimitedAbort } from "../store/commit-retry.ts";
import { outageOnce } from "../store/store-health.ts";
import type {
  ClaimedMessage,
  FailureReason,
  Settlement,
  SettleHandoff,
  SettleResult,
  Store,
} from "../store/types.ts";
import type { OnceSignal } from "./signal.ts";
import { stoppedOwner } from "../store/wake-rules.ts";
import { LEASE_EXPIRED, leaseSeconds, spentSettlement, unstartedFailure } from "./attempt-budget.ts";
import type { HandlerOutcome } from "./worker-pool-types.ts";

const SETTLE_BATCH = 256;
const SETTLE_PARALLEL = 2;

/** What one settle statement came to, handed back to the pool. */
export interface SettledBatch {
  batch: Settlement[];
  /** The settlements sent and their result; undefined when the settle was given up (logged). */
  sent: { settled: Settlement[]; result: SettleResult } | undefined;
  /** Keyed messages of the batch that settled for good (their room was held for a hand-off). */
  keyed: number;
  /** The batch makes other work claimable: a retry, or a key's head. */
  frees: boolean;
}

export interface SettleQueueOptions {
  store: Store;
  clock: Clock;
  logger: Logger;
  signal: OnceSignal;
  worker: string;
  leaseMs: number;
  handoff?: boolean;
  /** False once the pool stopped: a settle then hands off nothing (nothing would start it). */
  running(): boolean;
  /** A settle statement returned (or was given up); room held for it is already released. */
  settled(s: SettledBatch): void;
  /** A settle statement is over, after `settled` and after the next batch was sent. */
  after(): void;
}

/** Claims a stop marks as left to their lease (SettleQueue.leave): `left` once the mark answered. */
interface Leaving {
  claims: ReadonlySet<ClaimedMessage>;
  marked: Promise<ReadonlySet<string>>;
  left?: ReadonlySet<string>;
}

/** Settlements waiting and in flight for one pool, sent in batches of at most SETTLE_BATCH. */
export class SettleQueue {
  private pending: Settlement[] = [];
  /**
   * Lease expiry of each settlement in `pending`, at the same index: a retried settle gives up a
   * lease after it ran out. An array beside `pending`, not a Map keyed by settlement: a Map set and
   * delete per message were ~100 B of garbage and two hash operations on the hot path.
   */
  private pendingLeases: number[] = [];
  /** Ids in pending whose settle makes other work claimable: a retry, or a key's head. */
  private readonly freeing = new Set<string>();
  /** Ids in pending of keyed messages that settle for good: their key's next can be handed off. */
  private readonly keyedDone = new Set<string>();
  /** Room held for hand-offs (holdForHandoff), counted against the pool's claims. */
  private held = 0;
  /** Settle statements in flight (at most SETTLE_PARALLEL). */
  private readonly settling = new Set<Promise<void>>();
  /** Ends settle retries at the shutdown deadline. */
  private readonly abort = unlimitedAbort();
  /** One warn per store outage for the settle retries, the rest at debug. */
  private readonly firstOfOutage: () => boolean | undefined;
  /** The claims a graceful stop left to their lease (leave); undefined but after such a stop. */
  private leaving: Leaving | undefined;

  constructor(private readonly o: SettleQueueOptions) {
    this.firstOfOutage = outageOnce(o.store);
  }

  /** Room promised to hand-offs, which a claim must not take. */
  get roomHeld(): number {
    return this.held;
  }

  /** True when nothing waits to settle and no settle is in flight. */
  get empty(): boolean {
    return this.settling.size === 0 && this.pending.length === 0;
  }

  /**
   * A graceful stop is marking `claims` — their handlers still run at its deadline — as left to their
   * lease (Store.leaveClaimsToLease); `marked` resolves with the ids it marked (never rejects). A
   * marked claim settles under the fence the mark made (holder); an outcome that comes while the
   * mark is in flight waits for it, so it goes out under the fence the row will have.
   */
  leave(claims: readonly ClaimedMessage[], marked: Promise<ReadonlySet<string>>): void {
    const l: Leaving = { claims: new Set(claims), marked };
    this.leaving = l;
    void marked.then((ids) => {
      l.left = ids;
    });
  }

  /**
   * The holder `m`'s settlement is fenced by: its claim's, or `<worker>#stopped` once a stop's mark
   * left it (leave). A string, not an object to spread: this runs once per message.
   */
  private holder(m: ClaimedMessage): string {
    const l = this.leaving;
    return l?.left !== undefined && l.left.has(m.id) && l.claims.has(m)
      ? stoppedOwner(this.o.worker)
      : this.o.worker;
  }

  /** Queues the settlement of a handler's outcome (`abandon` leaves the message to lazy reclaim, logged). */
  outcome(m: ClaimedMessage, outcome: HandlerOutcome): void {
    if (outcome.kind === "abandon") return this.abandoned(m, outcome.runId);
    const l = this.leaving;
    if (l !== undefined && l.left === undefined && l.claims.has(m)) {
      void l.marked.then(() => this.outcome(m, outcome));
      return;
    }
    const s = this.o.signal;
    let settlement: Settlement;
    if (outcome.kind === "ok") {
      settlement = { id: m.id, worker: this.holder(m), attempt: m.attempts, status: "delivered" };
    } else {
      const failure: FailureReason = {
        ...outcome.failure,
        at: this.o.clock.now(),
        attempt: outcome.attempt ?? m.attempts,
      };
      const exhausted = m.attempts > s.retries || outcome.final === true;
      settlement = {
        id: m.id,
        worker: this.holder(m),
        attempt: m.attempts,
        status: exhausted ? (s.deadLetter ? "dead" : "delivered") : "pending",
        failure,
      };
      // A dead letter is work that did not get done: error, where a retried attempt is a warning.
      const log = settlement.status === "dead" ? this.o.logger.error : this.o.logger.warn;
      if (outcome.logged !== true)
        log.call(
          this.o.logger,
          {
            signal: s.name,
            messageId: m.id,
            ...(m.key === null ? {} : { key: m.key }),
            attempt: m.attempts,
            code: failure.code,
            outcome: settlement.status,
            // The stack of what the handler threw (pino's `err`): the line says where, not only what.
            ...(outcome.cause instanceof Error ? { err: outcome.cause } : {}),
          },
          `attempt ${m.attempts} failed: ${failure.message}`,
        );
    }
    this.pending.push(settlement);
    this.pendingLeases.push(m.leaseExpiresAt);
    if (settlement.status === "pending" || m.key !== null) this.freeing.add(m.id);
    if (this.o.handoff === true && settlement.status !== "pending" && m.key !== null)
      this.holdForHandoff(m.id);
    this.flush();
  }

  /**
   * Another holder has the message's run leased (JournalLeaseBusy): nothing is settled, the message
   * stays inflight under this claim's lease and is claimed again once it lapses — as a new attempt,
   * which then finds the run as its holder left it.
   */
  private abandoned(m: ClaimedMessage, runId: string | undefined): void {
    const now = this.o.clock.now();
    this.o.logger.warn(
      {
        signal: this.o.signal.name,
        messageId: m.id,
        attempt: m.attempts,
        code: "JournalLeaseBusy",
        runId: runId ?? m.id,
        retryInMs: Math.max(0, m.leaseExpiresAt - now),
      },
      `attempt ${m.attempts} left to its lease: run "${runId ?? m.id}" is leased by another holder; ` +
        `the message is redelivered after its lease (${leaseSeconds(this.o.leaseMs)}) lapses`,
    );
  }

  /**
   * A claim is an attempt: this one found every allowed attempt already made
   * (the last one crashed or hung past its lease), so it settles the message
   * without running it again and `retries + 1` invocations holds.
   */
  spent(m: ClaimedMessage): void {
    const settlement = spentSettlement(m, this.o.signal, this.o.worker, this.o.clock.now());
    this.o.logger.warn(
      {
        signal: this.o.signal.name,
        messageId: m.id,
        attempt: settlement.failure!.attempt,
        code: LEASE_EXPIRED,
        outcome: settlement.status,
      },
      settlement.failure!.message,
    );
    this.unrun(m, settlement);
  }

  /**
   * A buffered message dropped with its last attempt (its lease ran out before a slot freed up):
   * settled now, under the claim it still holds (a lapsed lease nobody reclaimed still settles), with
   * a failure that says it never started — not left for the next claim's "did not finish" text.
   * The pool's "buffered message dropped" line is its log line.
   */
  unstarted(m: ClaimedMessage): void {
    const s = this.o.signal;
    const now = this.o.clock.now();
    this.unrun(m, {
      id: m.id,
      worker: this.o.worker,
      attempt: m.attempts,
      status: s.deadLetter ? "dead" : "delivered",
      failure: { ...unstartedFailure(s, m.attempts, this.o.leaseMs), at: now, attempt: m.attempts },
    });
  }

  /** Queues the settlement of a message settled without running its handler. */
  private unrun(m: ClaimedMessage, settlement: Settlement): void {
    this.pending.push(settlement);
    this.pendingLeases.push(m.leaseExpiresAt);
    if (m.key !== null) this.freeing.add(m.id);
    if (this.o.handoff === true && m.key !== null && settlement.status !== "pending")
      this.holdForHandoff(m.id);
    this.flush();
  }

  /**
   * Settlements that finish while a settle is in flight go out together in the
   * next batch. A second statement goes out in parallel only for a backlog of
   * at least half a batch: settling is the slower half of a drain on PostgreSQL
   * (each row is rewritten), and one statement at a time left a tail of
   * unsettled messages after the last handler (bench/README.md).
   */
  flush(): void {
    while (
      this.pending.length > 0 &&
      (this.settling.size === 0 ||
        (this.settling.size < SETTLE_PARALLEL && this.pending.length >= SETTLE_BATCH / 2))
    ) {
      this.settleBatch(this.pending.splice(0, SETTLE_BATCH), this.pendingLeases.splice(0, SETTLE_BATCH));
    }
  }

  /** Sends everything waiting and resolves when no settle is left in flight (stop). */
  async drain(): Promise<void> {
    while (!this.empty) {
      this.flush();
      await Promise.all([...this.settling]);
    }
  }

  /** Ends the retries of settles still in flight: they are given up (logged) at their next try. */
  giveUp(): void {
    this.abort.abort();
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
    this.held++;
  }

  /** Settles one batch; hands off the room held for its keyed messages (holdForHandoff) while running. */
  private settleBatch(batch: Settlement[], leases: number[]): void {
    let frees = false;
    let keyed = 0;
    for (const b of batch) {
      frees = this.freeing.delete(b.id) || frees;
      if (this.keyedDone.delete(b.id)) keyed++;
    }
    // After stop() nothing would start a handed message.
    const max = this.o.running() ? keyed : 0;
    const handoff: SettleHandoff | undefined =
      max > 0 ? { worker: this.o.worker, leaseMs: this.o.leaseMs, max } : undefined;
    let held = keyed;
    const release = (): void => {
      this.held -= held;
      held = 0;
    };
    const done: Promise<void> = this.settleUntilCommitted(batch, leases, handoff)
      .then((sent) => {
        release();
        this.o.settled({ batch, sent, keyed, frees });
      })
      .finally(() => {
        release();
        this.settling.delete(done);
        this.flush();
        this.o.after();
      });
    this.settling.add(done);
  }

  /**
   * A failed settle is retried with backoff (the store fences it by holder and
   * attempt, so a retry never applies twice, and a retry of one that did commit
   * returns its result again) until it commits, the pool stops,
   * or a message's lease ran out a whole lease ago: by then it is another
   * holder's to run, so it is given up and logged. Dropping it at the first
   * failure re-ran every handler of the batch after a short database blip.
   */
  private async settleUntilCommitted(
    batch: Settlement[],
    leases: readonly number[],
    handoff?: SettleHandoff,
  ): Promise<{ settled: Settlement[]; result: SettleResult } | undefined> {
    const name = this.o.signal.name;
    let live = batch;
    // Only a failing settle asks for a message's lease; the lookup is built then.
    let leaseOf: Map<Settlement, number> | undefined;
    // One `now` for every try: a retry after a commit whose answer was lost (a connection reset)
    // is then the same request, which the store answers as the first commit did (applied and the
    // hand-off's claimed), not as a fenced-off settle that strands the handed message.
    const settleNow = this.o.clock.now();
    const r = await commitWithRetry(() => this.o.store.settle(live, settleNow, handoff), {
      signal: this.abort.signal,
      giveUp: () => {
        const now = this.o.clock.now();
        leaseOf ??= new Map(batch.map((b, i) => [b, leases[i]!]));
        const lost = live.filter((b) => (leaseOf!.get(b) ?? 0) + this.o.leaseMs <= now);
        if (lost.length > 0) {
          this.o.logger.error(
            { signal: name, gaveUp: lost.map((b) => ({ id: b.id, status: b.status })) },
            `settle of ${lost.length} message(s) given up: their lease ran out while the store was unavailable; they run again`,
          );
          live = live.filter((b) => !lost.includes(b));
        }
        return live.length === 0 ? "every lease ran out" : undefined;
      },
      onRetry: (err, attempt, delayMs) => {
        // During an outage the store knows of: one warn per outage with the error's text, the rest
        // at debug (the store logs the outage and its end); any other failure with its stack.
        const first = this.firstOfOutage();
        const fields = { signal: name, messages: live.length, attempt, retryInMs: delayMs };
        if (first === undefined) this.o.logger.warn({ err, ...fields }, "settle failed; retrying");
        else {
          const log = first ? this.o.logger.warn : this.o.logger.debug;
          log.call(
            this.o.logger,
            { error: err instanceof Error ? err.message : String(err), ...fields },
            "settle failed; retrying",
          );
        }
      },
    });
    if (r.ok) return { settled: live, result: r.value };
    if (live.length > 0)
      this.o.logger.error(
        { err: r.error, signal: name, gaveUp: live.map((b) => ({ id: b.id, status: b.status })) },
        `settle of ${live.length} message(s) given up (${r.reason}): they are reclaimed after their lease and run again`,
      );
    return undefined;
  }
}
