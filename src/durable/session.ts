/** JournalSession: replays a run's journal and journals each new step, call, send, emit and sleep. */
import { errorRecord, isOkeError, JournalLeaseBusy, OkeError } from "../errors.ts";
import { checkSameSignal } from "../signal/emit-once.ts";
import { checkJournalName } from "../signal/storable.ts";
import { retryJournalWrite, type JournalRetryDeps } from "./journal-retry.ts";
import { journalValue } from "./journal-value.ts";
import { firstFailure, restoreFailure } from "./step-errors.ts";
import { closeBody, currentBody, inBody, newBody, recordPosition, type BodyFrame } from "./step-scope.ts";
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
export { StepError } from "./step-errors.ts";

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

/** An effect of this attempt still running: what it is, and the step body it runs (steps only). */
interface InFlight {
  readonly what: string;
  body: BodyFrame | undefined;
}

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
  /** The first OKE1301 of this attempt: every later effect refuses with it, caught or not (see next()). */
  private mismatched: OkeError | undefined;
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
  /** Of a step whose body took positions: where its end entry is (the second step entry of that name). */
  private readonly stepEnds = new Map<string, number>();
  /** Positions a replayed step's body took (and its end entry): the code never asks for them again. */
  private readonly skip = new Set<number>();
  /**
   * A step journaled before steps had end entries, just replayed: the entries that follow it and were
   * written before it may be its body's, which took positions after the step's own (see next()).
   */
  private legacyTail: { next: number; at: number } | undefined;
  /** Step bodies of this attempt still running: a park inside one ends them (see closeBody). */
  private readonly bodies = new Set<BodyFrame>();
  /** Steps, calls, sends and emits the body started that have not settled (settleBeside). */
  private readonly inFlight = new Map<Promise<unknown>, InFlight>();

  constructor(
    private readonly deps: SessionDeps,
    entries: readonly JournalEntry[],
  ) {
    // By seq, not by order: after a hole, the entries that follow stay at their own positions, so the
    // retry runs the missing effect again and replays the rest instead of reading them one early.
    for (const e of entries) this.entries[e.seq] = e;
    const steps = new Set<string>();
    for (const e of this.entries)
      if (e?.kind === "step") {
        if (steps.has(e.name)) this.stepEnds.set(e.name, e.seq);
        else steps.add(e.name);
      }
    this.parked = new Promise((resolve) => (this.parkResolve = resolve));
    this.leaseUntil = deps.leaseExpiresAt;
  }

  get runId(): string {
    return this.deps.runId;
  }

  /** The lease owner this attempt writes as: its take's, until a graceful stop leaves the run to its lease. */
  get owner(): string {
    return this.deps.owner;
  }

  /**
   * A graceful stop left the run to its lease under `owner` (JournalStore.leaveToLease): every write
   * from now on is fenced by that name, so the attempt may go on until its process exits. A write
   * refused because it went out under the old name meanwhile goes again under the new one.
   */
  leftToLease(owner: string): void {
    this.deps.owner = owner;
  }

  /** Set once the lease is known lost (a renewal or a write was refused). */
  get lostLease(): JournalLeaseBusy | undefined {
    return this.lost;
  }

  /**
   * Set once the journal did not match the code (OKE1301) in this attempt, even if the flow caught it:
   * the run is held back whatever the body did next (runner.ts), never completed or failed by the code
   * that does not match its journal.
   */
  get mismatch(): OkeError | undefined {
    return this.mismatched;
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
        await this.fenced("lease renewal", () => {
          at = this.deps.now();
          return this.deps.store.renewLease({
            runId: this.deps.runId,
            owner: this.deps.owner,
            now: at,
            leaseMs: this.deps.leaseMs,
          });
        });
      } catch (e) {
        if (e instanceof JournalLeaseBusy) this.lost = e;
        throw e;
      }
      this.leaseRenewed(at);
    }
  }

  /**
   * A write fenced by the lease owner, retried through transient failures (retryJournalWrite), and
   * sent again when it was refused only because a graceful stop renamed the lease meanwhile
   * (leftToLease): `send` reads this.deps.owner each time it sends.
   */
  private async fenced(what: string, send: (attempt: number) => Promise<unknown>): Promise<void> {
    for (;;) {
      const as = this.deps.owner;
      try {
        await retryJournalWrite(this.deps.retry, what, this.deps.runId, send, () => this.lost);
        return;
      } catch (e) {
        if (!(e instanceof JournalLeaseBusy && this.deps.owner !== as && !this.lost)) throw e;
      }
    }
  }

  /** The entry journaled at the next position, checked against what the code asks for now. */
  private next(kind: JournalKind, name: string): { seq: number; entry: JournalEntry | undefined } {
    if (this.lost) throw this.lost;
    // A flow that caught an OKE1301 and went on would journal its new code after the old one's entries
    // (or replay the next ones at the wrong place): every effect after a mismatch refuses the same way.
    if (this.mismatched) throw this.mismatched;
    let seq = this.seq++;
    let entry = this.entries[seq];
    let tied: { seq: number; entry: JournalEntry } | undefined;
    for (;;) {
      if (this.skip.delete(seq)) {
        // A position the body of a replayed step took: the step's value stands for it.
      } else if (!(entry && this.legacyNested(seq, entry, kind, name))) break;
      else if (tied === undefined && entry.at === this.legacyTail?.at) tied = { seq, entry };
      seq = this.seq++;
      entry = this.entries[seq];
    }
    this.legacyTail = undefined;
    recordPosition(this, seq);
    // Passed over as an older layout's body only because it was written in the same millisecond as the
    // step, and nothing the code asks for followed: a current journal's next entry, not a body's. Taken
    // as a body's, a changed flow would journal its new effects past the old ones (a second sleep, a
    // step run again) instead of being held back.
    if (entry === undefined && tied !== undefined) this.refuse(tied.seq, tied.entry, kind, name);
    if (this.deps.replayOnly && (entry === undefined || entry.kind === "undo"))
      throw new ReplayEnd(this.deps.runId);
    if (entry && (entry.kind !== kind || entryName(entry) !== name)) this.refuse(seq, entry, kind, name);
    return { seq, entry };
  }

  /** OKE1301 at `seq`, kept for every later effect of this attempt. */
  private refuse(seq: number, entry: JournalEntry, kind: JournalKind, name: string): never {
    throw this.mismatchAt(seq, entry, `asks for ${kind} "${name}"`);
  }

  private mismatchAt(seq: number, entry: JournalEntry, asks: string): OkeError {
    this.mismatched = new OkeError({
      code: "OKE1301",
      message: `journal: run "${this.deps.runId}" recorded ${entry.kind} "${entryName(entry)}" at position ${seq}, but the code now ${asks}`,
      fix: "The flow's code changed under a live run. Keep the order and names of steps, sleeps, emits and ids stable for runs in flight, or let them finish before deploying.",
    });
    return this.mismatched;
  }

  /**
   * The body ended (`how`: "returns", "fails: …") while the journal still holds effects past the last
   * position it asked for: the same code would have replayed them first, so it changed under the run
   * (the step or sleep the run was at removed, a new early return or throw). OKE1301 naming the first
   * one, else undefined. Positions a replayed step's body took do not count, nor undos, nor, right after
   * a step of the older layout, the entries written before it (its body's: see legacyNested).
   */
  endedEarly(how: string): OkeError | undefined {
    if (this.deps.replayOnly) return undefined;
    const tail = this.legacyTail;
    const legacyBefore = tail !== undefined && tail.next === this.seq ? tail.at : undefined;
    for (let p = this.seq; p < this.entries.length; p++) {
      const e = this.entries[p];
      if (e === undefined || e.kind === "undo" || this.skip.has(p)) continue;
      if (legacyBefore !== undefined && e.at < legacyBefore) continue;
      return this.mismatchAt(p, e, how);
    }
    return undefined;
  }

  /**
   * Journals written before steps had end entries: a step's body took the positions right after its
   * own, and the step's entry was written after them. So right after such a step, an entry written no
   * later than it that is not what the code asks for is taken as its body's, and passed over; one
   * that is, or any entry written after the step, is read as usual. (Such a journal failed with
   * OKE1301 here before; nothing that replayed then reads differently now.)
   */
  private legacyNested(seq: number, entry: JournalEntry, kind: JournalKind, name: string): boolean {
    const tail = this.legacyTail;
    if (tail === undefined || tail.next !== seq || entry.kind === "undo" || entry.at > tail.at) return false;
    if (entry.kind === kind && entryName(entry) === name) return false;
    tail.next = seq + 1;
    return true;
  }

  /**
   * A journaled step replayed at `seq`: its body does not run, so the positions it took are skipped —
   * those its end entry lists, or for an older journal without one, the entries after it (above).
   */
  private replayedStep(seq: number, entry: JournalEntry, name: string): void {
    const end = this.stepEnds.get(name);
    const taken =
      end === undefined || end <= seq
        ? undefined
        : (this.entries[end]?.value as { nested?: unknown })?.nested;
    if (end !== undefined && end > seq && Array.isArray(taken)) {
      this.skip.add(end);
      for (const p of taken) if (typeof p === "number" && p > seq) this.skip.add(p);
      return;
    }
    this.legacyTail = { next: seq + 1, at: entry.at };
  }

  /**
   * The entry that ends a step whose body took positions (its effects, and those of steps nested in
   * it): a second step entry of the same name after them, listing them, so that a replay of the
   * step skips exactly those — not a concurrent sibling's. None for a body that took none.
   */
  private endOf(name: string, body: BodyFrame): JournalEntry[] {
    if (body.taken.length === 0) return [];
    const { seq, entry } = this.next("step", name);
    if (entry) return [];
    return [this.entry(seq, "step", name, { value: { nested: [...body.taken] } })];
  }

  private async write(entry: JournalEntry | JournalEntry[] | undefined, emits?: NewMessage[]): Promise<void> {
    if (this.lost) throw this.lost;
    // What is pending rides along, by position (a failure held back may come after a later id).
    const entries = entry === undefined ? [...this.pending] : this.pending.concat(entry);
    if (this.pending.length > 0) entries.sort((a, b) => a.seq - b.seq);
    if (entries.length === 0) return;
    let at = 0;
    try {
      // Retried through a transient failure; append is idempotent, so a retry of one that committed writes nothing.
      await this.fenced("journal append", () =>
        this.deps.store.append({
          runId: this.deps.runId,
          owner: this.deps.owner,
          now: (at = this.deps.now()),
          entries,
          leaseMs: this.deps.leaseMs,
          ...(emits ? { emits } : {}),
        }),
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
  private async failed(entries: JournalEntry[]): Promise<void> {
    if (this.deps.journalErrors) await this.write(entries);
    else this.pending.push(...entries);
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
    extra: Partial<Pick<NamedEntry, "value" | "error">>,
  ): NamedEntry {
    return { runId: this.deps.runId, seq, kind, name, at: this.deps.now(), ...extra };
  }

  step<T>(name: string, fn: () => Promise<T> | T): Promise<{ value: T; replayed: boolean }> {
    const rec: InFlight = { what: `fx.step(${JSON.stringify(name)})`, body: undefined };
    return this.track(this.runStep(name, fn, rec), rec);
  }

  private async runStep<T>(
    name: string,
    fn: () => Promise<T> | T,
    rec: InFlight,
  ): Promise<{ value: T; replayed: boolean }> {
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
      this.replayedStep(seq, entry, name);
      if (entry.error) throw restoreFailure(entry.error);
      return { value: entry.value as T, replayed: true };
    }
    await this.ensureLease();
    const body = newBody(this);
    rec.body = body;
    let text: string | undefined;
    this.bodies.add(body);
    try {
      const value = await inBody(body, fn).finally(() => this.bodies.delete(body));
      // Checked before anything is written: what one driver could not hold, none journals. A value
      // refused fails the step like a throw (journaled as its error, so replay fails it the same).
      text = journalValue(value, `step ${JSON.stringify(name)} of run "${this.deps.runId}"`);
    } catch (e) {
      if (isControl(e)) throw e;
      // The body sees the failure as a replay will rebuild it from the journal (see step-errors.ts).
      const { journal, thrown } = firstFailure(e);
      await this.failed([this.entry(seq, "step", name, { error: journal }), ...this.endOf(name, body)]);
      throw thrown;
    }
    const json = text === undefined ? undefined : (JSON.parse(text) as T);
    await this.write([
      this.entry(seq, "step", name, json === undefined ? {} : { value: json }),
      ...this.endOf(name, body),
    ]);
    return { value: json as T, replayed: false };
  }

  /** A value produced once and replayed afterwards (fx.call results, sends, live tape entry ids). */
  once<T>(kind: "call" | "send" | "emit", name: string, make: (seq: number) => Promise<T> | T): Promise<T> {
    const rec: InFlight = { what: `fx.${kind}(${JSON.stringify(name)})`, body: undefined };
    return this.track(this.runOnce(kind, name, make), rec);
  }

  private async runOnce<T>(
    kind: "call" | "send" | "emit",
    name: string,
    make: (seq: number) => Promise<T> | T,
  ): Promise<T> {
    const { seq, entry } = this.next(kind, name);
    if (entry) {
      if (entry.error) throw restoreFailure(entry.error);
      return entry.value as T;
    }
    await this.ensureLease();
    let value: T;
    try {
      // `seq` lets make() derive ids from the journal position, the same on every replay.
      value = await make(seq);
      journalValue(value, `${kind} ${JSON.stringify(name)} of run "${this.deps.runId}"`);
    } catch (e) {
      // A failed call (the callee threw or failed, its input or result was refused) is journaled
      // as the call's error, as a step's is: a flow that catches it and carries on replays the same
      // failure at the same position, and its next entries stay where they were journaled. The
      // flow sees it as the replay will (a send's failure is never journaled: it stays as thrown).
      if (kind !== "call" || isControl(e)) throw e;
      const { journal, thrown } = firstFailure(e);
      await this.failed([this.entry(seq, kind, name, { error: journal })]);
      throw thrown;
    }
    await this.write(this.entry(seq, kind, name, value === undefined ? {} : { value }));
    return value;
  }

  /**
   * Journals the emit and enqueues the message in one commit; replay skips both.
   * `messages` replaces what is enqueued (a broadcast's per-flow copies of the event).
   */
  emit(message: NewMessage, messages: NewMessage[] = [message], chosenId = false): Promise<void> {
    const rec: InFlight = { what: `fx.emit(${JSON.stringify(message.signal)})`, body: undefined };
    return this.track(this.runEmit(message, messages, chosenId), rec);
  }

  private async runEmit(message: NewMessage, messages: NewMessage[], chosenId: boolean): Promise<void> {
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
    // A step (or call, send, emit) started beside this sleep and not awaited first would lose its
    // journal write to the park (the lease goes with it): its work done, unjournaled, run again after
    // the wake — and its rejection took the process down. It is journaled first.
    await this.settleBeside(`fx.clock.sleep(${JSON.stringify(label)})`);
    await this.write(undefined);
    // Retried like append; a retry first looks whether the previous try parked the run (its reply was lost).
    await this.fenced("park", async (attempt) => {
      if (attempt > 1 && (await this.parkedAlready(seq, label))) return;
      await this.deps.store.park({
        runId: this.deps.runId,
        owner: this.deps.owner,
        now,
        entry: sleepEntry,
      });
    });
    this.entries[seq] = sleepEntry;
    this.wakeAt = wakeAt;
    for (const body of this.bodies) closeBody(body);
    this.parkResolve?.(wakeAt);
    return never();
  }

  /** Registers an effect until it settles (a handler of its own: its caller still sees the outcome). */
  private track<T>(p: Promise<T>, rec: InFlight): Promise<T> {
    this.inFlight.set(p, rec);
    const done = (): void => void this.inFlight.delete(p);
    p.then(done, done);
    return p;
  }

  /**
   * Before the run parks or ends (`by`): waits for the effects the body started and has not awaited —
   * all but the steps whose bodies the caller runs inside (a sleep in a step body). Each is named in
   * one warning: a missing `await` is a bug (its failure reached no code), but its work must not be
   * lost or done twice. Effects the wait itself sees start are waited for too.
   */
  async settleBeside(by: string): Promise<void> {
    const inside = new Set<BodyFrame>();
    for (let f = currentBody(this); f !== undefined; f = f.parent) inside.add(f);
    const beside = (): Array<[Promise<unknown>, InFlight]> =>
      [...this.inFlight].filter(([, r]) => r.body === undefined || !inside.has(r.body));
    let waiting = beside();
    if (waiting.length === 0) return;
    this.deps.retry.logger.warn(
      { runId: this.deps.runId, effects: waiting.map(([, r]) => r.what) },
      `durable run: ${by} came while ${waiting.map(([, r]) => r.what).join(", ")} still ran; waiting for ${waiting.length === 1 ? "it" : "them"} to be journaled first — await every fx call before the next`,
    );
    while (waiting.length > 0) {
      await Promise.allSettled(waiting.map(([p]) => p));
      waiting = beside();
    }
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

/**
 * Failures that are not the effect's own: the lease is gone, a compensating replay reached its end,
 * the journal no longer matches the code. They end the attempt as they are, never journaled as the
 * step's or call's failure (a body that caught them would go on from a journal it no longer holds).
 */
const isControl = (e: unknown): boolean =>
  e instanceof JournalLeaseBusy || e instanceof ReplayEnd || (isOkeError(e) && e.code === "OKE1301");
