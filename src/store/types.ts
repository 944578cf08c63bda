/** The Store contract: every type and method a driver implements. */
/**
 * The Store contract: the queue of once-signal messages and the journal of
 * durable runs live behind one interface, so a run's journal entries and the
 * messages it emits can commit together (the outbox). Drivers: memory (the
 * reference semantics), file, postgres. Every driver passes store/conformance.
 *
 * Time never comes from the driver: every call carries `now` (epoch ms) from
 * the app's Clock, so time travel works on every driver, SQL included.
 */
import type { IdempotencyStore } from "./idempotency-types.ts";
import type { RunRetentionStore } from "./retention-types.ts";
import type { ScheduleStore } from "./schedule-types.ts";

import type { CompensationStore } from "./compensation-types.ts";
import type { HealthStore } from "./health-types.ts";
import type { ConsoleStore, InstanceInfo } from "./console-types.ts";
import type { FanoutStore } from "./fanout-types.ts";
import type {
  FailureReason,
  NewMessage,
  StoredMessage,
  RunStatus,
  RunRecord,
  RunError,
  Unsubscribe,
} from "./record-types.ts";

// The records the contract carries, in a file of their own so the per-capability *-types.ts files
// can name them without importing this one back.
export type {
  MessageStatus,
  FailureReason,
  SignalFailureReason,
  NewMessage,
  StoredMessage,
  RunStatus,
  RunRecord,
  RunError,
  RunHold,
  Unsubscribe,
} from "./record-types.ts";

/** What a worker gets from a claim. `attempts` already counts this attempt. */
export interface ClaimedMessage {
  id: string;
  signal: string;
  key: string | null;
  payload: unknown;
  parentRunId: string | null;
  attempts: number;
  createdAt: number;
  lockedBy: string;
  leaseExpiresAt: number;
}

export interface ClaimRequest {
  signal: string;
  /** Holder id stamped into `lockedBy`. */
  worker: string;
  /** Claim at most this many messages. */
  max: number;
  now: number;
  leaseMs: number;
}

/**
 * The outcome the runtime decided for one claimed attempt. The store applies it
 * only if the message is still held by (`worker`, `attempt`): a holder whose
 * lease was reclaimed changes nothing (fencing).
 */
export interface Settlement {
  id: string;
  worker: string;
  attempt: number;
  /** `pending` = retry now; `delivered`; `dead`. */
  status: "pending" | "delivered" | "dead";
  failure?: FailureReason;
}

export interface SettleResult {
  /** Ids whose settlement applied; the rest were fenced off. */
  applied: string[];
  /** Messages claimed by the hand-off (see `SettleHandoff`), oldest first; absent when none. */
  claimed?: ClaimedMessage[];
}

/**
 * Optional hand-off at settle: a keyed message that settled (delivered or dead)
 * passes its key to the key's next pending message, claimed in the same commit
 * by `worker` (attempt + 1, lease `now + leaseMs`) — at most `max` of them,
 * oldest first. The next message of a key then needs no claim statement. A
 * successor another claimer has locked, or one behind a live lease, is left
 * to claim (the settle announces it). Drivers whose claim costs no I/O ignore it.
 */
export interface SettleHandoff {
  worker: string;
  leaseMs: number;
  max: number;
}

/**
 * A claim its holder gives back without having started it (QueueStore.releaseClaimed): the holder
 * and the attempt the claim returned, the fence as for a Settlement.
 */
export interface ClaimRelease {
  id: string;
  worker: string;
  attempt: number;
}

/**
 * A delivered message settled again (QueueStore.resettleDelivered): a durable consumer's message
 * is settled `delivered` when its run parks, and a step failing after the wake means the work was
 * not done after all.
 */
export interface ResettleDelivered {
  /** The message as emitted: what a message retention pruned meanwhile is recreated from. */
  message: NewMessage;
  /** Its operator replays (StoredMessage.replays), kept on a recreated message; default 0. */
  replays?: number;
  /** The attempts it had when it settled `delivered`: the fence (another claim since changes them). */
  attempts: number;
  /** `pending` = retry (claimable again), `dead`, or `delivered` with the failure (deadLetter: false). */
  status: "pending" | "delivered" | "dead";
  /** Appended to its failures; `failure.attempt` is normally `attempts`. */
  failure: FailureReason;
}

export interface SignalStats {
  signal: string;
  pending: number;
  inflight: number;
  dead: number;
  delivered: number;
  /**
   * Of `delivered`, those with at least one failure recorded: a broadcast copy whose handler failed
   * or was cut off (copies are settled delivered, never retried), a once message delivered after a
   * retry. Optional, as it came after the first drivers: without it the Console counts failed copies
   * among the newest delivered only.
   */
  deliveredFailed?: number;
  /** Age in ms of the oldest pending message at `now`, or null when none is pending. */
  oldestPendingAgeMs: number | null;
}

export type JournalKind = "step" | "sleep" | "emit" | "send" | "id" | "call" | "undo";

interface JournalEntryBase {
  runId: string;
  /** 0-based position in the run. */
  seq: number;
  /** Journaled value (step result, generated id …); JSON-serialisable. */
  value?: unknown;
  /** Journaled failure of a step. */
  error?: { code: string; message: string };
  at: number;
}

/** `fx.clock.sleep(label, duration)`: the deadline is journaled, not the duration alone. */
export interface SleepEntry extends JournalEntryBase {
  kind: "sleep";
  /** Checked on replay like a step name. */
  label: string;
  duration: string;
  wakeAt: number;
}

/** Every other entry: `name` is the step name, signal, channel, callee … and is checked on replay. */
export interface NamedEntry extends JournalEntryBase {
  kind: Exclude<JournalKind, "sleep">;
  name: string;
}

/** One journal row, keyed by (runId, seq). */
export type JournalEntry = SleepEntry | NamedEntry;

/** What replay compares at a position: a sleep's label, any other entry's name. */
export const entryName = (e: JournalEntry): string => (e.kind === "sleep" ? e.label : e.name);

export interface StartRun {
  id: string;
  flow: string;
  input: unknown;
  parentRunId: string | null;
  owner: string;
  now: number;
  leaseMs: number;
}

/** A journal's first and last entries (Store.getJournalEnds), each list in seq order. */
export interface JournalEnds {
  head: JournalEntry[];
  tail: JournalEntry[];
  /** Entries in the whole journal: those between `head` and `tail` number `count - head.length - tail.length`. */
  count: number;
}

/** A run whose lease the caller now holds, with its journal so far. */
export interface AcquiredRun {
  run: RunRecord;
  entries: JournalEntry[];
  /** True when this call created the run. */
  created: boolean;
  /**
   * claimDueRuns only: the deadline the claim found the run due at — a sleeper's `wakeAt` (later than
   * `now` for a reservation, under `sleepersDueBy`), a lapsed lease's expiry.
   */
  dueAt?: number;
  /**
   * Set when this take counted a recovery (the run's `recoveries` went up): the holder whose lapsed
   * lease it took the run over from. Absent for any other take, and from drivers that do not say.
   */
  recoveredFrom?: string;
}

/**
 * Runs a graceful stop leaves to their leases (JournalStore.leaveToLease): each run with the owner
 * whose attempt of it was still running at the stop deadline.
 */
export interface LeaveToLeaseRequest {
  runs: ReadonlyArray<{ runId: string; owner: string }>;
  now: number;
}

/**
 * An operator ends a run for good (JournalStore.terminateRun): it ends `failed` with `error`, its
 * undos not run (the code may no longer match its journal).
 */
export interface TerminateRequest {
  runId: string;
  now: number;
  error: { code: string; message: string };
}

/**
 * What a terminate did: `terminated` (the run as it now stands); `held` when someone holds it (a
 * live lease, or a live reservation of a sleeper) — nothing written; `final` when it had already
 * ended (a retry of a terminate that applied answers this); `missing` when there is no such run.
 */
export type TerminateOutcome =
  | { outcome: "terminated"; run: RunRecord }
  | { outcome: "held"; leaseOwner: string; leaseExpiresAt: number }
  | { outcome: "final"; status: "completed" | "failed" }
  | { outcome: "missing" };

export interface AppendRequest {
  runId: string;
  owner: string;
  now: number;
  entries: JournalEntry[];
  /** Messages that commit in the same transaction as the entries (the outbox). */
  emits?: NewMessage[];
  /** Renew the lease to now + leaseMs while at it. */
  leaseMs?: number;
}

export interface ReleaseRequest {
  runId: string;
  owner: string;
  now: number;
  retryAt?: number;
  /**
   * Why the run is given back, for operators: kept with it (as `RunRecord.held`) while it waits with
   * no holder; `since` is `now`, or the last note's when this one repeats it (same code and message,
   * same journal length: a retry that failed the same way). A release without one clears the last. Optional in the contract
   * (ConformanceOptions.releaseHold): a driver that drops it shows such a run as running, no holder.
   */
  hold?: { code: string; message: string };
}

export interface FinishRequest {
  runId: string;
  owner: string;
  now: number;
  status: "completed" | "failed";
  output?: unknown;
  error?: RunError;
}

/**
 * Which runs a claim or a scan may touch: only runs of these flows — the
 * durable flows the calling instance can run — so an instance never takes a
 * run it would have to give back, and an app with no durable flows (`[]`)
 * takes none. Absent: runs of every flow (operator tools, older callers).
 */
export interface RunFlowFilter {
  flows?: readonly string[];
}

export interface ClaimDueRunsRequest extends RunFlowFilter {
  owner: string;
  now: number;
  max: number;
  leaseMs: number;
  /**
   * Only these runs (still only when due, and of `flows` if given): the
   * instance that parked a run and holds its wake timer claims just that run
   * by id — one primary-key statement on postgres instead of a scan of the
   * deadline indexes. Absent: any due run.
   */
  runIds?: readonly string[];
  /**
   * Sleepers whose `wakeAt` is at most this (≥ `now`) are due too, and one not due yet at `now` is
   * *reserved*: the claim takes its lease (owner, expiry) and leaves it `sleeping` with its `wakeAt`
   * (listed as a sleeper; the recovery count is untouched). A scheduler reserves a sleeper a little
   * ahead of its wake time, so the claim's commit is not on the wake's path, and at its `dueAt`
   * resumes it with a second claim by id under the same owner — a holder's own reservation is due to
   * it at any time and that claim sets it `running`. Other claimers skip a sleeper whose reservation
   * lease is live; one whose reservation lapsed is an ordinary due sleeper. Taking a reservation that
   * lapsed after its wake time counts one recovery (its holder may have run the step after the
   * sleep); one that lapsed before its wake time counts none (nothing can have run).
   * `releaseRun` gives a reservation back (still sleeping). Leases of running runs still lapse at
   * `now` only (never taken early). Absent: `now`.
   */
  sleepersDueBy?: number;
}

export interface ParkRequest {
  runId: string;
  owner: string;
  now: number;
  /** The sleep entry; its `wakeAt` becomes the run's. */
  entry: SleepEntry;
}

/**
 * What subscribers hear. `enqueued`: new messages of the signal. `settled`: a
 * settle made messages of the signal claimable — a retry back to pending, a
 * keyed message whose successor may now be its key's head, or a claim given
 * back unstarted (releaseClaimed); plain deliveries are not announced. `wake`: re-check everything (a poll tick, a reconnect, a wake
 * time that moved).
 */
export type StoreEvent =
  { kind: "enqueued"; signal: string } | { kind: "settled"; signal: string } | { kind: "wake" };

/** Queue half of the contract. */
export interface QueueStore {
  /**
   * Stores messages durably; resolves only after they are committed. `tx` is a
   * caller's open transaction (postgres: a `pg` client inside BEGIN) so the
   * caller's own writes and the messages commit or roll back together; other
   * drivers reject it.
   */
  enqueue(messages: NewMessage[], now: number, options?: { tx?: unknown }): Promise<void>;
  /**
   * Optional (claim at emit): stores unkeyed messages already claimed by
   * `claim.worker` — `inflight`, attempt 1, `leaseExpiresAt = now + leaseMs` —
   * and resolves with them once committed. A producer whose own worker has a
   * free slot starts the handler on the commit, with no claim round trip. The
   * messages are never announced (nobody else may take them until the lease
   * lapses; then lazy reclaim applies as for any claim). Keyed messages are
   * refused: their order is decided by claim. Drivers whose claim costs no I/O
   * leave it out.
   */
  enqueueClaimed?(
    messages: NewMessage[],
    now: number,
    claim: { worker: string; leaseMs: number },
  ): Promise<ClaimedMessage[]>;
  /**
   * Claims up to `max` messages of one signal. Eligible: `pending`, or `inflight`
   * with `leaseExpiresAt <= now` (lazy reclaim — there is no sweeper). Never two
   * messages of one (signal, key) inflight; each key's oldest message first.
   * Sets `inflight`, `lockedBy`, `leaseExpiresAt = now + leaseMs`, `attempts + 1` (+ 0 reclaiming a
   * lease a graceful stop left: leaveClaimsToLease).
   */
  claim(req: ClaimRequest): Promise<ClaimedMessage[]>;
  /**
   * Applies outcomes in one batch, fenced by (worker, attempt); `handoff`: see SettleHandoff.
   * Idempotent: a settle retried with the same request (settlements, `now`, handoff) after its
   * commit — the client lost the answer — applies nothing more and returns the same result: the
   * same `applied`, and as `claimed` the messages its first commit handed off. Callers retry with
   * the first try's `now`. (Memory and file settle in-process: a commit cannot fail after it.)
   */
  settle(settlements: Settlement[], now: number, handoff?: SettleHandoff): Promise<SettleResult>;
  /**
   * Undoes claims their holder never started (a worker pool that stops with claimed messages it
   * will not run): each message still held by (`worker`, `attempt`) goes back to `pending` with
   * `attempts - 1`, lock and lease cleared, as if never claimed — the next claim is attempt
   * `attempt` again, not `attempt + 1`, so a last attempt is not spent unrun. A message no longer
   * held by that claim (its lease lapsed and it was claimed again, or it was settled) is left
   * alone. A keyed message stays its key's head (it keeps its emit order) and blocks its
   * successors as before. Announced like a settle that made work claimable (`settled` for each
   * signal released), so other instances claim it at once. Returns the ids released, in the
   * caller's order, each once; a retry after a commit whose answer was lost releases nothing more
   * (and reports nothing).
   */
  releaseClaimed(claims: ClaimRelease[], now: number): Promise<string[]>;
  /**
   * A graceful stop's mark on the claims whose handlers still run at its deadline (the process may
   * run them a little longer before it exits): the queue twin of JournalStore.leaveToLease. Each
   * message still held by (`worker`, `attempt`) stays `inflight` with its attempts, lease and expiry
   * — no one claims it before the lease lapses, since the handler may still be running — but its
   * holder becomes `<worker>#stopped` (wake-rules stoppedOwner), and the claim that reclaims it after
   * the lapse adds no attempt (claim-rules claimCounts): it runs as attempt `attempt` again. A handler
   * cut short by a deploy does not spend its message's retry budget, where a crash (a lapse with no
   * mark) does. The holder may still settle it, fenced by (`<worker>#stopped`, `attempt`). A message
   * no longer so held is left alone.
   * Resolves with the ids left so, in the caller's order, each once (a retry after a lost reply
   * reports the same and writes nothing more); nothing is announced (nothing became claimable).
   * Absent (a third-party driver): the stop leaves its claims as they are, and each claim after the
   * lapse counts an attempt.
   */
  leaveClaimsToLease?(claims: ClaimRelease[], now: number): Promise<string[]>;
  /**
   * Settles a `delivered` message again, as `status` with `failure` appended — for a durable
   * consumer whose run failed after the park that delivered its message. Applies only while the
   * message is `delivered` with `attempts` (fenced: a message claimed, replayed or settled since is
   * left alone) and `failure` is not already its last (idempotent: a retry after a lost reply
   * writes nothing more). Attempts, `seq` and `createdAt` are kept, so a `pending` message rejoins
   * its key's order where it was emitted: it is claimed before the key's later pending messages,
   * and not beside one of its key still inflight. A message that is gone (retention pruned it) is
   * recreated from `message` with `attempts`, `replays` and the failure, as the newest of its key.
   * A `pending` result is announced like a settle that made work claimable. Resolves true when the
   * message now stands as asked (by this call or an earlier try of it), false when left alone.
   * Absent (a third-party driver): such a run fails and its message stays `delivered`.
   */
  resettleDelivered?(req: ResettleDelivered, now: number): Promise<boolean>;
  /** Dead messages of one signal, oldest first. */
  deadLetters(signal: string, limit?: number): Promise<StoredMessage[]>;
  getMessage(id: string): Promise<StoredMessage | undefined>;
  /** Operator: dead -> pending with attempts and lock reset. Returns ids replayed. */
  replay(signal: string, ids: readonly string[] | "all", now: number): Promise<string[]>;
  /** Operator: removes dead messages. Returns ids discarded. */
  discard(signal: string, ids: readonly string[] | "all"): Promise<string[]>;
  /**
   * Operator: removes those of `ids` that are pending messages of `signal` right now (never one
   * inflight, delivered or dead: a message claimed meanwhile is left to its attempt). A keyed one's
   * successors keep their order: the next of its key becomes claimable when nothing of the key is
   * inflight. Returns the ids removed, in the order given (duplicates dropped). Absent (a third-party driver): pending messages
   * are never removed, and the Console answers 501.
   */
  discardPending?(signal: string, ids: readonly string[]): Promise<string[]>;
  stats(signal: string, now: number): Promise<SignalStats>;
  /** Earliest `leaseExpiresAt` of an inflight message of `signal`, or null. */
  nextLeaseExpiry(signal: string): Promise<number | null>;
  /** Deletes delivered messages last updated before `before`. Returns how many. */
  pruneDelivered(before: number): Promise<number>;
}

/** A take of a run's lease (JournalStore.acquireRun). */
export interface AcquireRequest {
  runId: string;
  owner: string;
  now: number;
  leaseMs: number;
  /** Refuse a sleeping run (JournalLeaseBusy) instead of waking it: take only a run in flight. */
  inFlightOnly?: boolean;
}

/** Journal half of the contract. */
export interface JournalStore {
  /**
   * Creates the run holding its lease, or — if it exists — acquires it like
   * `acquireRun`. Throws JournalLeaseBusy when another owner holds a live lease.
   */
  startRun(req: StartRun): Promise<AcquiredRun>;
  /**
   * Takes the lease of an existing non-terminal run (expired or free). With `inFlightOnly`, only a
   * run still running or compensating: a sleeper is refused with JournalLeaseBusy (the boot's orphan
   * scan, which listed the run while it ran: a run parked since waits for its wake time).
   */
  acquireRun(req: AcquireRequest): Promise<AcquiredRun>;
  /** Extends the lease; throws JournalLeaseBusy if `owner` no longer holds it. */
  renewLease(req: { runId: string; owner: string; now: number; leaseMs: number }): Promise<void>;
  /** Appends entries (and emits) atomically; fenced by owner. */
  append(req: AppendRequest): Promise<void>;
  /** Appends the sleep entry, sets `sleeping` + `wakeAt`, releases the lease. */
  park(req: ParkRequest): Promise<void>;
  /** Terminal status; releases the lease. */
  finish(req: FinishRequest): Promise<void>;
  /**
   * Releases the lease without changing status (graceful shutdown). With
   * `retryAt`, the run becomes claimable by claimDueRuns from then on, as if
   * its lease had expired at that time — for an instance that cannot run it
   * (its flow is not in this version of the app) — and schedulers are told
   * (a `wake` event), so another instance takes it over. A reserved
   * sleeper (see `sleepersDueBy`) stays sleeping with its `wakeAt`, its lease
   * cleared: due to any claimer at its wake time.
   */
  releaseRun(req: ReleaseRequest): Promise<void>;
  /**
   * A graceful stop's mark on the runs it leaves to their leases, their attempts still running at
   * its deadline (the process may run them a little longer before it exits). Each running or
   * compensating run `owner` holds keeps its lease and expiry — no one else takes it before the lease
   * lapses — but its owner becomes `<owner>#stopped` (wake-rules stoppedOwner), under which the
   * holder may go on writing and renewing until its process exits, and the take after the lapse
   * counts no recovery: its holder was stopping, not dying. A run `owner` no longer holds (ended,
   * parked, released, taken over) is left alone. Resolves with the ids whose lease is left so
   * (a retry after a lost reply reports the same and writes nothing more); one statement per call.
   * Absent (a third-party driver): the stop leaves its runs as they are, and each takeover after it
   * counts a recovery.
   */
  leaveToLease?(req: LeaveToLeaseRequest): Promise<string[]>;
  /**
   * An operator ends the run for good: it becomes `failed` with `req.error`, lease and wake time
   * cleared, so nothing claims it again — only while no one holds it: a sleeper (unless another's
   * reservation of it is live), or a running or compensating run with no holder or a lapsed lease
   * (a held-back run, a dead instance's). A live holder is refused (`held`, nothing written); its
   * own writes after a terminate are refused with JournalLeaseBusy. No undo runs. One atomic write,
   * fenced like a take. Absent (a third-party driver): runs cannot be terminated (the Console and
   * `oke terminate` say so).
   */
  terminateRun?(req: TerminateRequest): Promise<TerminateOutcome>;
  /**
   * Acquires up to `max` runs that need an owner: sleeping runs whose
   * `wakeAt <= now` (set `running`), and running runs whose lease expired
   * (`leaseExpiresAt <= now`, not released) — a dead instance's runs, taken
   * over lazily like expired message leases. Each run goes to one claimer.
   * A sleeper another owner reserved (`sleepersDueBy`) is skipped while its
   * lease is live.
   * With `flows`, only runs of those flows: others keep their status and
   * `wakeAt` until an instance that has their flow claims them. With
   * `runIds`, only those runs (each still only if due).
   */
  claimDueRuns(req: ClaimDueRunsRequest): Promise<AcquiredRun[]>;
  /**
   * `running` / `sleeping` runs with no live lease at `now` (boot orphan scan),
   * running ones first, so a caller after running orphans can page with `limit`.
   * With `filter.flows`, only runs of those flows.
   */
  listOrphans(now: number, limit?: number, filter?: RunFlowFilter): Promise<RunRecord[]>;
  /**
   * Earliest deadline: a sleeping run's `wakeAt` or a running run's
   * `leaseExpiresAt`; null if none. With `filter.flows`, among runs of those
   * flows only (a scheduler arms on deadlines it can claim).
   */
  nextWakeAt(filter?: RunFlowFilter): Promise<number | null>;
  /** Moves a sleeping run's `wakeAt` to `now`; false if missing or not sleeping. */
  wakeEarly(runId: string, now: number): Promise<boolean>;
  getRun(runId: string): Promise<RunRecord | undefined>;
  getJournal(runId: string): Promise<JournalEntry[]>;
  /**
   * The first `head` and the last `tail` entries of a run's journal and how many it has, for a
   * reader that shows a long journal's ends (the Console's timeline, a sleeper's label) without
   * reading every entry. The two lists never share an entry (a journal of `head + tail` entries
   * or fewer is all in `head`); an unknown run reads as empty. Optional in the contract: a caller
   * without it reads `getJournal`.
   */
  getJournalEnds?(runId: string, head: number, tail: number): Promise<JournalEnds>;
  listRuns(filter: { status?: RunStatus; flow?: string; limit?: number }): Promise<RunRecord[]>;
}

/** Store.open's options; a driver uses what applies to it and ignores the rest. */
export interface StoreOpenOptions {
  /**
   * The app instance opening the store, as its heartbeats name it. PostgreSQL records it in the
   * transaction that checks the schema's migrations, so a newer version's boot counts it (OKE1335)
   * from its open on, not only from its first heartbeat at the end of its boot. Others ignore it.
   */
  instance?: Pick<InstanceInfo, "id" | "host" | "pid">;
}

export interface Store
  extends
    QueueStore,
    JournalStore,
    ConsoleStore,
    FanoutStore,
    HealthStore,
    ScheduleStore,
    CompensationStore,
    IdempotencyStore,
    RunRetentionStore {
  /** The built-in drivers names, or a third-party driver s own (okengine/store). */
  readonly driver: "memory" | "file" | "postgres" | (string & {});
  /**
   * How long before a sleeper's `wakeAt` its instance claims it (`claimDueRuns`' `sleepersDueBy`),
   * resuming it at `wakeAt` from a local timer: a driver whose claim is a network commit hides that
   * round trip (postgres: 50 ms). Absent or 0: claimed when due (memory, file).
   */
  readonly wakeLookaheadMs?: number;
  /**
   * Prepares the store (migrations, recovery, locks). Idempotent (the first call's options count);
   * a failed open may be called again.
   */
  open(options?: StoreOpenOptions): Promise<void>;
  /**
   * True when an error of `open()` says the store cannot be reached right now (a server down or
   * starting up, a refused connection), not that it refused the work (a bad migration, no permission,
   * a schema newer than this code). Boot retries those for `database.connectTimeoutMs`. Absent: every
   * open error stops the boot at once.
   */
  isUnavailable?(err: unknown): boolean;
  /** Where the store lives, for boot logs and errors, without credentials (postgres: `host:port/database`). */
  readonly address?: string;
  /** Flushes and releases resources. */
  close(): Promise<void>;
  /** Work arrived or a deadline moved: workers re-check instead of polling. */
  subscribe(listener: (event: StoreEvent) => void): Unsubscribe;
}
