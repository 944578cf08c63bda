/** JournalSession: replays a run's journal and journals each new step, call, send, emit and sleep. */
import { errorRecord, isOkeError, JournalLeaseBusy, OkeError } from "../errors.ts";
import { checkSameSignal } from "../signal/emit-once.ts";
import { checkJournalName, journalJson } from "../signal/storable.ts";
import { retryJournalWrite, type JournalRetryDeps } from "./journal-retry.ts";
import {
  entryName,
  type JournalEntry,
  type JournalKind,
  type NamedEntry,
  type NewMessage,
  type SleepEntry,
  type Store,
} from "../store/types.ts";

export { errorRecord } from "../errors.ts";

export interface SessionDeps {
  store: Store;
  runId: string;
  owner: string;
  leaseMs: number;
  now(): number;
  /**
   * Journal a failed step's error at once so replay rethrows it. Off while the run's
   * trigger will retry (a once consumer with attempts left): the retry must run the
   * step again. The error is then held and journaled only if the body goes on to
   * journal something else (it caught the failure, so its path depends on it).
   */
  journalErrors: boolean;
  /** A compensating run resumed after a crash: replay only, never past the journal (ReplayEnd). */
  replayOnly?: boolean;
  /** Retries of journal writes through transient store failures (logger, clock, stop deadline). */
  retry: JournalRetryDeps;
  /** When the lease the attempt was handed runs out (app clock); null: none to keep fresh. */
  leaseExpiresAt: number | null;
}

/**
 * The promise returned to user code at a park never settles: the attempt ends
 * there. A new one per park: a shared never-settling promise would collect one
 * reaction per parked run and so keep every parked attempt's suspended body,
 * fx and session reachable for the life of the process (~2.8 KB per run).
 */
const never = (): Promise<never> => new Promise<never>(() => undefined);

/**
 * The latest wake time a sleep may ask for: JavaScript's last representable Date (year 275760).
 * The duration grammar has no upper bound, and a later wakeAt is a time no Date, log line or store
 * column can hold (PostgreSQL's bigint overflows further on): refused at the call, nothing written.
 */
const LATEST_WAKE_AT = 8_640_000_000_000_000;

/** What an attempt's body resolves to when the run parked. */
export const PARKED: unique symbol = Symbol("okengine.parked");

/**
 * One attempt's view of a run's journal. Each effect takes the next position;
 * on replay the journaled entry at that position must be of the same kind and
 * name (the code changed under a live run otherwise), and its value is
 * returned instead of running the effect again.
 */
export class JournalSession {
  private seq = 0;
  private readonly names = new Set<string>();
  private lost: JournalLeaseBusy | undefined;
  /**
   * Entries that ride with the next write: ids taken since the last one (fx.id() is synchronous),
   * and failures held back while the trigger retries (journalErrors off). Neither matters unless
   * some later effect is journaled: then the body used the id, or caught the failure and went on.
   */
  private readonly pending: JournalEntry[] = [];
  private parkResolve: ((wakeAt: number) => void) | undefined;
  /** The lease is ours until then at least: from the take, each renewal and each append. */
  private leaseUntil: number | null;
  /** Resolves with wakeAt when the run parks; the attempt races it with the flow body. */
  readonly parked: Promise<number>;
  /** Set once parked. */
  wakeAt: number | undefined;

  /** Indexed by position: an effect that failed unjournaled (attempts left) leaves its position empty. */
  private readonly entries: JournalEntry[] = [];

  constructor(
    private readonly deps: SessionDeps,
    entries: readonly JournalEntry[],
  ) {
    // By seq, not by order: after a hole, the entries that follow stay at their own positions, so the
    // retry runs the missing effect again and replays the rest instead of reading them one early.
    for (const e of entries) this.entries[e.seq] = e;
    this.parked = new Promise((resolve) => (this.parkResolve = resolve));
    this.leaseUntil = deps.leaseExpiresAt;
  }

  get runId(): string {
    return this.deps.runId;
  }

  /** Set once the lease is known lost (a renewal or a write was refused). */
  get lostLease(): JournalLeaseBusy | undefined {
    return this.lost;
  }

  /** Called by the heartbeat when a renew fails: every later write refuses. */
  markLost(err: JournalLeaseBusy): void {
    this.lost = err;
  }

  /** A renewal (or an append, which renews) sent at `at` committed: the lease holds until at + leaseMs. */
  leaseRenewed(at: number): void {
    const until = at + this.deps.leaseMs;
    if (this.leaseUntil !== null && until > this.leaseUntil) this.leaseUntil = until;
  }

  /**
   * Before new work — the attempt's first code, a step body, a call, a send: a lease with less than
   * half of it left may have lapsed meanwhile (a start or claim answered late, an event loop stalled
   * since the last renewal) and another instance taken the run and run this very step. It is renewed
   * first, fenced; refused, the session is lost and nothing runs (JournalLeaseBusy). A prompt attempt
   * with a live heartbeat never needs the statement.
   */
  async ensureLease(): Promise<void> {
    for (;;) {
      if (this.lost) throw this.lost;
      if (this.leaseUntil === null || this.deps.now() <= this.leaseUntil - this.deps.leaseMs / 2) return;
      let at = 0;
      try {
        await retryJournalWrite(
          this.deps.retry,
          "lease renewal",
          this.deps.runId,
          () => {
            at = this.deps.now();
            return this.deps.store.renewLease({
              runId: this.deps.runId,
              owner: this.deps.owner,
              now: at,
              leaseMs: this.deps.leaseMs,
            });
          },
          () => this.lost,
        );
      } catch (e) {
        if (e instanceof JournalLeaseBusy) this.lost = e;
        throw e;
      }
      this.leaseRenewed(at);
    }
  }

  /** The entry journaled at the next position, checked against what the code asks for now. */
  private next(kind: JournalKind, name: string): { seq: number; entry: JournalEntry | undefined } {
    if (this.lost) throw this.lost;
    const seq = this.seq++;
    const entry = this.entries[seq];
    if (this.deps.replayOnly && (entry === undefined || entry.kind === "undo"))
      throw new ReplayEnd(this.deps.runId);
    if (entry && (entry.kind !== kind || entryName(entry) !== name)) {
      throw new OkeError({
        code: "OKE1301",
        message: `journal: run "${this.deps.runId}" recorded ${entry.kind} "${entryName(entry)}" at position ${seq}, but the code now asks for ${kind} "${name}"`,
        fix: "The flow's code changed under a live run. Keep the order and names of steps, sleeps, emits and ids stable for runs in flight, or let them finish before deploying.",
      });
    }
    return { seq, entry };
  }

  private async write(entry: JournalEntry | undefined, emits?: NewMessage[]): Promise<void> {
    if (this.lost) throw this.lost;
    // What is pending rides along, by position (a failure held back may come after a later id).
    const entries = entry ? [...this.pending, entry] : [...this.pending];
    if (this.pending.length > 0) entries.sort((a, b) => a.seq - b.seq);
    if (entries.length === 0) return;
    let at = 0;
    try {
      // Retried through a transient failure; append is idempotent, so a retry of one that committed writes nothing.
      await retryJournalWrite(
        this.deps.retry,
        "journal append",
        this.deps.runId,
        () =>
          this.deps.store.append({
            runId: this.deps.runId,
            owner: this.deps.owner,
            now: (at = this.deps.now()),
            entries,
            leaseMs: this.deps.leaseMs,
            ...(emits ? { emits } : {}),
          }),
        () => this.lost,
      );
    } catch (e) {
      if (e instanceof JournalLeaseBusy) this.lost = e;
      throw e;
    }
    this.leaseRenewed(at);
    this.pending.length = 0;
    for (const e of entries) this.entries[e.seq] = e;
  }

  /**
   * A failed step or call: journaled now, or — while the trigger retries — held until the body
   * journals anything else. A body that lets the failure end the attempt never journals it, and
   * the retry runs the effect again; one that catches it and goes on (to a step, an emit, a sleep)
   * journals it first, so a resume after a wake or a crash takes the same path.
   */
  private async failed(entry: JournalEntry): Promise<void> {
    if (this.deps.journalErrors) await this.write(entry);
    else this.pending.push(entry);
  }

  /**
   * fx.id() is synchronous, so a new id is journaled with the next write; on
   * replay the journaled id comes back.
   */
  id(make: () => string): string {
    const { seq, entry } = this.next("id", "id");
    if (entry) return entry.value as string;
    const value = make();
    this.pending.push(this.entry(seq, "id", "id", { value }));
    return value;
  }

  private entry(
    seq: number,
    kind: NamedEntry["kind"],
    name: string,
    extra: Pick<NamedEntry, "value" | "error">,
  ): NamedEntry {
    return { runId: this.deps.runId, seq, kind, name, at: this.deps.now(), ...extra };
  }

  async step<T>(name: string, fn: () => Promise<T> | T): Promise<{ value: T; replayed: boolean }> {
    if (typeof name !== "string" || name === "")
      throw new TypeError("fx.step(name, fn): name must be a non-empty string");
    if (this.names.has(name)) {
      throw new OkeError({
        code: "OKE1302",
        message: `journal: step "${name}" is used twice in run "${this.deps.runId}"`,
        fix: "Give every fx.step in a run a unique name (add the loop index: `charge-${i}`).",
      });
    }
    checkJournalName(name, `step ${JSON.stringify(name)} of run "${this.deps.runId}"`, "name");
    this.names.add(name);
    const { seq, entry } = this.next("step", name);
    if (entry) {
      if (entry.error) throw restoreError(entry.error);
      return { value: entry.value as T, replayed: true };
    }
    await this.ensureLease();
    let text: string | undefined;
    try {
      const value = await fn();
      // Checked before anything is written: what one driver could not hold, none journals. A value
      // refused fails the step like a throw (journaled as its error, so replay fails it the same).
      text = journalJson(value, `step ${JSON.stringify(name)} of run "${this.deps.runId}"`);
    } catch (e) {
      await this.failed(this.entry(seq, "step", name, { error: errorRecord(e) }));
      throw e;
    }
    const json = text === undefined ? undefined : (JSON.parse(text) as T);
    await this.write(this.entry(seq, "step", name, json === undefined ? {} : { value: json }));
    return { value: json as T, replayed: false };
  }

  /** A value produced once and replayed afterwards (fx.call results, sends, live tape entry ids). */
  async once<T>(
    kind: "call" | "send" | "emit",
    name: string,
    make: (seq: number) => Promise<T> | T,
  ): Promise<T> {
    const { seq, entry } = this.next(kind, name);
    if (entry) {
      if (entry.error) throw restoreError(entry.error);
      return entry.value as T;
    }
    await this.ensureLease();
    let value: T;
    try {
      // `seq` lets make() derive ids from the journal position, the same on every replay.
      value = await make(seq);
      journalJson(value, `${kind} ${JSON.stringify(name)} of run "${this.deps.runId}"`);
    } catch (e) {
      // A failed call (the callee threw or failed, its input or result was refused) is journaled
      // as the call's error, as a step's is: a flow that catches it and carries on replays the same
      // failure at the same position, and its next entries stay where they were journaled.
      if (kind === "call" && !(e instanceof JournalLeaseBusy))
        await this.failed(this.entry(seq, kind, name, { error: errorRecord(e) }));
      throw e;
    }
    await this.write(this.entry(seq, kind, name, value === undefined ? {} : { value }));
    return value;
  }

  /**
   * Journals the emit and enqueues the message in one commit; replay skips both.
   * `messages` replaces what is enqueued (a broadcast's per-flow copies of the event).
   */
  async emit(message: NewMessage, messages: NewMessage[] = [message], chosenId = false): Promise<void> {
    const { seq, entry } = this.next("emit", message.signal);
    if (entry) return;
    const journaled = this.entry(seq, "emit", message.signal, {
      value: { messageId: message.id, key: message.key },
    });
    try {
      await this.write(journaled, messages);
    } catch (e) {
      // A caller-chosen id (fx.emit { id }) stored already: the emit is a no-op, journaled alone.
      if (!(chosenId && isOkeError(e) && e.code === "OKE1261")) throw e;
      await checkSameSignal(this.deps.store, message);
      await this.write(journaled);
    }
  }

  /**
   * Journals `wakeAt` and parks. A journaled sleep is a no-op on replay: the
   * run only gets past it once the scheduler found it due (or woke it early).
   */
  async sleep(label: string, duration: string, ms: number): Promise<void> {
    checkJournalName(label, `sleep ${JSON.stringify(label)} of run "${this.deps.runId}"`, "label");
    checkJournalName(duration, `sleep ${JSON.stringify(label)} of run "${this.deps.runId}"`, "duration");
    const { seq, entry } = this.next("sleep", label);
    if (entry) return;
    const now = this.deps.now();
    const wakeAt = now + ms;
    if (wakeAt > LATEST_WAKE_AT) {
      throw new OkeError({
        code: "OKE1304",
        message: `journal: sleep ${JSON.stringify(label)} of run "${this.deps.runId}" for "${duration}" would wake after the latest time a run can wake (${new Date(LATEST_WAKE_AT).toISOString()})`,
        fix: "Sleep for a shorter duration; an operator can wake a sleeping run early at any time.",
      });
    }
    const sleepEntry: SleepEntry = {
      runId: this.deps.runId,
      seq,
      kind: "sleep",
      label,
      duration,
      wakeAt,
      at: now,
    };
    if (ms <= 0) {
      await this.write(sleepEntry);
      return;
    }
    await this.write(undefined);
    // Retried like append; a retry first looks whether the previous try parked the run (its reply was lost).
    await retryJournalWrite(
      this.deps.retry,
      "park",
      this.deps.runId,
      async (attempt) => {
        if (attempt > 1 && (await this.parkedAlready(seq, label))) return;
        await this.deps.store.park({
          runId: this.deps.runId,
          owner: this.deps.owner,
          now,
          entry: sleepEntry,
        });
      },
      () => this.lost,
    );
    this.entries[seq] = sleepEntry;
    this.wakeAt = wakeAt;
    this.parkResolve?.(wakeAt);
    return never();
  }

  /** True when the run sleeps on this very sleep entry: a park that committed. */
  private async parkedAlready(seq: number, label: string): Promise<boolean> {
    if ((await this.deps.store.getRun(this.deps.runId))?.status !== "sleeping") return false;
    const at = (await this.deps.store.getJournal(this.deps.runId)).find((e) => e.seq === seq);
    return at?.kind === "sleep" && at.label === label;
  }

  /** Runs compensations LIFO; each is journaled as `undo:<name>` so a resumed run does not undo twice. */
  async compensate(undos: Array<{ name: string; run: () => Promise<void> | void }>): Promise<void> {
    const done = new Set(this.entries.filter((e) => e?.kind === "undo").map(entryName));
    // After every position the body took, journaled or not: an id taken after the last write is
    // still pending and rides with the first undo at its own position.
    let seq = Math.max(this.entries.length, this.seq);
    for (const u of [...undos].reverse()) {
      const name = `undo:${u.name}`;
      if (done.has(name)) continue;
      let error: { code: string; message: string } | undefined;
      try {
        await u.run();
      } catch (e) {
        error = errorRecord(e);
      }
      await this.write(this.entry(seq++, "undo", name, error ? { error } : {}));
    }
  }
}

/**
 * Thrown at the end of the journal when a compensating run is resumed: the
 * body only replays (re-registering the undos of its journaled steps) and
 * never does new work past the failure.
 */
export class ReplayEnd extends Error {
  override readonly name = "ReplayEnd";
  constructor(runId: string) {
    super(`durable run "${runId}" is compensating: replay stops at the end of its journal`);
  }
}

/** A journaled step failure rethrown on replay. */
export class StepError extends Error {
  override readonly name = "StepError";
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

const restoreError = (rec: { code: string; message: string }): Error => new StepError(rec.code, rec.message);
