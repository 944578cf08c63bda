/** SqliteEngine: the file driver's engine — the MemoryEngine's synchronous surface over SQLite tables. */
import type Database from "better-sqlite3";
import { JournalLeaseBusy } from "../../../errors.ts";
import { storeErrors } from "../../index.ts";
import type {
  AcquiredRun,
  AppendRequest,
  ClaimDueRunsRequest,
  ClaimedMessage,
  ClaimRequest,
  FailureReason,
  FinishRequest,
  JournalEntry,
  MessageStatus,
  NewMessage,
  ParkRequest,
  ReleaseRequest,
  RunFlowFilter,
  RunRecord,
  RunStatus,
  Settlement,
  SignalStats,
  StartRun,
  StoredMessage,
} from "../../types.ts";
import type {
  AuditEntry,
  AuditRecord,
  InstanceInfo,
  InstanceRecord,
  MessagePageRequest,
  Page,
  RunPageRequest,
  Throughput,
} from "../../console-types.ts";
import type { BeginCompensationRequest } from "../../compensation-types.ts";
import type { NewTapeEntry, TapeEntry, TapeRead } from "../../fanout-types.ts";
import type {
  ClaimIdempotencyRequest,
  CompleteIdempotencyRequest,
  CompleteOutcome,
  IdempotencyClaim,
  IdempotencyRecord,
  StoredResponse,
} from "../../idempotency-types.ts";
import { decideClaim, decideComplete, runningFor } from "../../idempotency-rules.ts";
import type {
  DeclaredSchedule,
  FireRequest,
  ScheduleError,
  ScheduleFire,
  ScheduleRecord,
  ScheduleSpec,
} from "../../schedule-types.ts";
import {
  applyFire,
  applyOverride,
  applyPaused,
  cloneSchedule,
  fireApplies,
  planReconcile,
} from "../../schedule-rules.ts";
import { assertHolder, finishState, parkState, releaseState } from "../../journal-rules.ts";
import {
  claimLease,
  dueAtFor,
  dueForClaim,
  runDeadline,
  sleepersHorizon,
  takeLease,
  type RunState,
  type RunStateOf,
} from "../../wake-rules.ts";
import { decodeCursor, encodeCursor } from "../../console-cursor.ts";
import { sameEntryContent } from "../../journal-same.ts";
import type { EngineSettleResult } from "../../memory/memory-queue.ts";
import type { LeaseRequest } from "../../memory/memory-journal.ts";
import type { TapeCut } from "../../memory/memory-tapes.ts";

type Db = Database.Database;
type Stmt = Database.Statement<unknown[], unknown>;

/** JSON in a TEXT column: SQL NULL is `undefined`. */
const enc = (v: unknown): string | null => (v === undefined ? null : JSON.stringify(v));
const dec = (s: string | null): unknown => (s === null ? undefined : (JSON.parse(s) as unknown));

interface MsgRow {
  seq: number;
  id: string;
  signal: string;
  key: string | null;
  payload: string | null;
  parent_run_id: string | null;
  status: MessageStatus;
  ready: number;
  attempts: number;
  failures: string;
  locked_by: string | null;
  lease_expires_at: number | null;
  created_at: number;
  updated_at: number;
  replays: number;
}

interface RunRow {
  id: string;
  flow: string;
  status: RunStatus;
  input: string | null;
  output: string | null;
  error: string | null;
  parent_run_id: string | null;
  lease_owner: string | null;
  lease_expires_at: number | null;
  wake_at: number | null;
  deadline: number | null;
  status_seq: number;
  /** Migration 0003 (RunRecord.recoveries). */
  recoveries: number;
  created_at: number;
  updated_at: number;
}

interface EntryRow {
  run_id: string;
  seq: number;
  kind: JournalEntry["kind"];
  name: string;
  value: string | null;
  error: string | null;
  duration: string | null;
  wake_at: number | null;
  at: number;
}

interface IdemRow {
  key: string;
  fingerprint: string;
  status: "running" | "done";
  response: string | null;
  run_id: string;
  locked_until: number;
  created_at: number;
  expires_at: number;
}

interface TapeRow {
  signal: string;
  key: string;
  position: number;
  id: string;
  payload: string | null;
  created_at: number;
}

const toStored = (m: MsgRow): StoredMessage => ({
  id: m.id,
  signal: m.signal,
  key: m.key,
  payload: dec(m.payload),
  parentRunId: m.parent_run_id,
  status: m.status,
  attempts: m.attempts,
  failures: JSON.parse(m.failures) as FailureReason[],
  lockedBy: m.locked_by,
  leaseExpiresAt: m.lease_expires_at,
  createdAt: m.created_at,
  updatedAt: m.updated_at,
  ...(m.replays > 0 ? { replays: m.replays } : {}),
});

const toClaimed = (m: MsgRow): ClaimedMessage => ({
  id: m.id,
  signal: m.signal,
  key: m.key,
  payload: dec(m.payload),
  parentRunId: m.parent_run_id,
  attempts: m.attempts,
  createdAt: m.created_at,
  lockedBy: m.locked_by!,
  leaseExpiresAt: m.lease_expires_at!,
});

function toRun(r: RunRow): RunRecord {
  const out: RunRecord = {
    id: r.id,
    flow: r.flow,
    status: r.status,
    input: dec(r.input),
    parentRunId: r.parent_run_id,
    leaseOwner: r.lease_owner,
    leaseExpiresAt: r.lease_expires_at,
    wakeAt: r.wake_at,
    recoveries: r.recoveries,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
  const output = dec(r.output);
  if (output !== undefined) out.output = output;
  if (r.error !== null) out.error = JSON.parse(r.error) as { code: string; message: string };
  return out;
}

function toEntry(e: EntryRow): JournalEntry {
  const out: JournalEntry =
    e.kind === "sleep"
      ? {
          runId: e.run_id,
          seq: e.seq,
          kind: "sleep",
          label: e.name,
          duration: e.duration!,
          wakeAt: e.wake_at!,
          at: e.at,
        }
      : { runId: e.run_id, seq: e.seq, kind: e.kind, name: e.name, at: e.at };
  const value = dec(e.value);
  if (value !== undefined) out.value = value;
  if (e.error !== null) out.error = JSON.parse(e.error) as { code: string; message: string };
  return out;
}

const toIdem = (r: IdemRow): IdempotencyRecord => ({
  key: r.key,
  fingerprint: r.fingerprint,
  status: r.status,
  response: r.response === null ? null : (JSON.parse(r.response) as StoredResponse),
  runId: r.run_id,
  lockedUntil: r.locked_until,
  createdAt: r.created_at,
  expiresAt: r.expires_at,
});

const toTape = (t: TapeRow): TapeEntry => ({
  id: t.id,
  signal: t.signal,
  key: t.key,
  payload: dec(t.payload),
  position: t.position,
  createdAt: t.created_at,
});

/** An entry's name column. A sleep journaled before sleeps had a `label` carried it in `name`. */
const nameOf = (e: JournalEntry): string =>
  e.kind === "sleep" ? (e.label ?? (e as unknown as { name: string }).name) : e.name;

/** The row's scheduling state by the rules' names (wake-rules.ts). */
const stateOfRow = (r: RunRow): RunStateOf => ({
  id: r.id,
  status: r.status,
  leaseOwner: r.lease_owner,
  leaseExpiresAt: r.lease_expires_at,
  wakeAt: r.wake_at,
  recoveries: r.recoveries,
  updatedAt: r.updated_at,
});

export interface SqliteEngineOptions {
  /** Turns a failed write (disk full, I/O error) into the error callers see; the engine then refuses calls. */
  wrapFailure: (cause: unknown) => Error;
}

/**
 * The file driver's engine: every method of the MemoryEngine, synchronous,
 * over prepared statements. Each mutating method runs in a savepoint (it
 * applies fully or not at all) inside the batch transaction: the first write
 * of a turn opens it (BEGIN IMMEDIATE) and a setImmediate commits it, so all
 * calls of a turn share one commit and one WAL fsync (group commit).
 * `pending()` is the commit of the batch a call just read or wrote; the store
 * awaits it before the call resolves, so nobody sees undurable state.
 */
export class SqliteEngine {
  private readonly stmts = new Map<string, Stmt>();
  private readonly inSavepoint: (fn: () => unknown) => unknown;
  private batch: { promise: Promise<void>; resolve: () => void; reject: (e: unknown) => void } | null = null;
  private failure: Error | null = null;
  private statusSeq: number;
  private tapeLast: number;
  /** Batches committed (one fsync each) since the engine was created. */
  commits = 0;

  constructor(
    private readonly db: Db,
    private readonly opts: SqliteEngineOptions,
  ) {
    this.inSavepoint = db.transaction((fn: () => unknown) => fn());
    this.statusSeq = this.get<{ m: number | null }>("SELECT max(status_seq) AS m FROM runs")?.m ?? 0;
    this.tapeLast = this.get<{ v: number }>("SELECT v FROM meta WHERE k = 'tape_last'")?.v ?? 0;
  }

  /** The failure that stopped the engine, if any. */
  get failed(): Error | null {
    return this.failure;
  }

  /** The commit of the open batch, or null when nothing waits to commit. */
  pending(): Promise<void> | null {
    return this.batch?.promise ?? null;
  }

  /** Commits the open batch now (close, tests). */
  flush(): void {
    this.commit();
  }

  // Plumbing

  private stmt(sql: string): Stmt {
    let s = this.stmts.get(sql);
    if (s === undefined) {
      s = this.db.prepare(sql);
      this.stmts.set(sql, s);
    }
    return s;
  }
  private get<T>(sql: string, ...params: unknown[]): T | undefined {
    return this.stmt(sql).get(...params) as T | undefined;
  }
  private all<T>(sql: string, ...params: unknown[]): T[] {
    return this.stmt(sql).all(...params) as T[];
  }
  private run(sql: string, ...params: unknown[]): number {
    return this.stmt(sql).run(...params).changes;
  }

  private check(): void {
    if (this.failure !== null) throw this.failure;
  }

  /** Runs `fn` as one all-or-nothing step of the open batch. */
  private write<T>(fn: () => T): T {
    this.check();
    try {
      if (!this.db.inTransaction) {
        this.db.exec("BEGIN IMMEDIATE");
        if (this.batch === null) {
          let resolve: () => void = () => undefined;
          let reject: (e: unknown) => void = () => undefined;
          const promise = new Promise<void>((res, rej) => {
            resolve = res;
            reject = rej;
          });
          // Nobody may await a batch (a write that changed nothing); its failure still stops the engine.
          promise.catch(() => undefined);
          this.batch = { promise, resolve, reject };
          setImmediate(() => this.commit());
        }
      }
      return this.inSavepoint(fn) as T;
    } catch (e) {
      if (isIoFailure(e)) this.fail(e);
      throw this.failure ?? e;
    }
  }

  /**
   * One COMMIT = one fsync of the WAL (synchronous=FULL). The event loop is
   * blocked for the turn's statements plus that fsync, so a turn's work is the
   * bound: measured with bench/file-drain.ts on the loaded 2-core dev box
   * (load 5-7), a turn of 1 single-message enqueue took 0.15-1.2 ms, of 16
   * 0.4-1.6 ms, of 256 3.5-6 ms, statements and fsync included.
   */
  private commit(): void {
    const b = this.batch;
    if (b === null) return;
    this.batch = null;
    if (this.failure !== null) {
      b.reject(this.failure);
      return;
    }
    try {
      if (this.db.inTransaction) this.db.exec("COMMIT");
      this.commits++;
      b.resolve();
    } catch (e) {
      this.fail(e);
      b.reject(this.failure);
    }
  }

  private fail(cause: unknown): void {
    if (this.failure === null) this.failure = this.opts.wrapFailure(cause);
    try {
      if (this.db.inTransaction) this.db.exec("ROLLBACK");
    } catch {
      // The connection is abandoned and reopened by the store's recovery.
    }
    const b = this.batch;
    this.batch = null;
    b?.reject(this.failure);
  }

  // Queue

  private msg(id: string): MsgRow | undefined {
    return this.get<MsgRow>("SELECT * FROM messages WHERE id = ?", id);
  }

  private saveMsg(m: MsgRow): void {
    this.run(
      `UPDATE messages SET status = ?, ready = ?, attempts = ?, failures = ?, locked_by = ?,
         lease_expires_at = ?, updated_at = ? WHERE seq = ?`,
      m.status,
      m.ready,
      m.attempts,
      m.failures,
      m.locked_by,
      m.lease_expires_at,
      m.updated_at,
      m.seq,
    );
  }

  /**
   * Re-derives which message of (signal, key) is claimable — its oldest pending
   * one, if nothing of the key is inflight — by reading all its live messages.
   * For the rare writes that can put an older message ahead of a ready head
   * (an operator replay, a reclaim that must wait behind one).
   */
  private refreshKey(signal: string, key: string): void {
    const live = this.all<{ seq: number; status: MessageStatus; ready: number }>(
      `SELECT seq, status, ready FROM messages WHERE signal = ? AND key = ? AND key IS NOT NULL
         AND status IN ('pending', 'inflight') ORDER BY seq`,
      signal,
      key,
    );
    const busy = live.some((m) => m.status === "inflight");
    let head = true;
    for (const m of live) {
      if (m.status !== "pending") continue;
      const want = !busy && head ? 1 : 0;
      head = false;
      if (m.ready !== want) this.run("UPDATE messages SET ready = ? WHERE seq = ?", want, m.seq);
    }
  }

  /**
   * The key's inflight message just settled (delivered, dead, or back to
   * pending): nothing of the key is inflight now and nothing of it was ready,
   * so its oldest pending message — two index probes, not a walk of the
   * key's backlog — becomes the one claimable.
   */
  private advanceKey(signal: string, key: string): void {
    const head = this.get<{ seq: number; ready: number }>(
      `SELECT seq, ready FROM messages WHERE signal = ? AND key = ? AND key IS NOT NULL
         AND status IN ('pending', 'inflight') ORDER BY seq LIMIT 1`,
      signal,
      key,
    );
    if (head === undefined || head.ready === 1) return;
    if (
      this.get(
        `SELECT 1 FROM messages WHERE signal = ? AND key = ? AND key IS NOT NULL
           AND status = 'inflight' LIMIT 1`,
        signal,
        key,
      ) !== undefined
    )
      return;
    this.run(
      `UPDATE messages SET ready = 1 WHERE seq = (SELECT seq FROM messages WHERE signal = ? AND key = ?
         AND key IS NOT NULL AND status = 'pending' ORDER BY seq LIMIT 1)`,
      signal,
      key,
    );
  }

  /** Throws if any message cannot be enqueued; changes nothing. */
  checkEnqueue(messages: readonly NewMessage[]): void {
    const seen = new Set<string>();
    for (const m of messages) {
      if (seen.has(m.id) || this.get("SELECT 1 FROM messages WHERE id = ?", m.id) !== undefined)
        throw storeErrors.duplicateMessage(m.id);
      seen.add(m.id);
    }
  }

  private insertMessages(messages: readonly NewMessage[], now: number): void {
    // A keyed message is its key's claimable head only if nothing of the key is live (this batch included).
    const busyKeys = new Set<string>();
    for (const m of messages) {
      let ready = 1;
      if (m.key !== null) {
        const k = JSON.stringify([m.signal, m.key]);
        ready =
          busyKeys.has(k) ||
          this.get(
            `SELECT 1 FROM messages WHERE signal = ? AND key = ? AND key IS NOT NULL
               AND status IN ('pending', 'inflight') LIMIT 1`,
            m.signal,
            m.key,
          ) !== undefined
            ? 0
            : 1;
        busyKeys.add(k);
      }
      this.run(
        `INSERT INTO messages (id, signal, key, payload, parent_run_id, status, ready, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, 'pending', ?, ?, ?)`,
        m.id,
        m.signal,
        m.key,
        enc(m.payload),
        m.parentRunId,
        ready,
        now,
        now,
      );
    }
  }

  enqueue(messages: readonly NewMessage[], now: number): void {
    this.check();
    this.checkEnqueue(messages);
    this.write(() => this.insertMessages(messages, now));
  }

  claim(req: ClaimRequest): ClaimedMessage[] {
    this.check();
    if (req.max <= 0) return [];
    const expired = this.all<MsgRow>(
      `SELECT * FROM messages WHERE signal = ? AND status = 'inflight' AND lease_expires_at <= ?
         ORDER BY lease_expires_at, seq LIMIT ?`,
      req.signal,
      req.now,
      req.max,
    );
    const ready = (): MsgRow[] =>
      this.all<MsgRow>(
        "SELECT * FROM messages WHERE signal = ? AND ready = 1 ORDER BY seq LIMIT ?",
        req.signal,
        req.max,
      );
    if (
      expired.length === 0 &&
      this.get("SELECT 1 FROM messages WHERE signal = ? AND ready = 1", req.signal) === undefined
    )
      return [];
    return this.write(() => {
      const picked: MsgRow[] = [];
      for (const m of expired) {
        if (m.key !== null) {
          const older = this.get(
            `SELECT 1 FROM messages WHERE signal = ? AND key = ? AND status = 'pending' AND seq < ? LIMIT 1`,
            m.signal,
            m.key,
            m.seq,
          );
          if (older !== undefined) {
            // An operator replayed an older message of this key: it goes first, this one waits behind it.
            m.status = "pending";
            m.locked_by = null;
            m.lease_expires_at = null;
            m.updated_at = req.now;
            m.ready = 0;
            this.saveMsg(m);
            this.refreshKey(m.signal, m.key);
            continue;
          }
        }
        picked.push(m);
      }
      if (picked.length < req.max)
        for (const m of ready()) {
          if (picked.length >= req.max) break;
          picked.push(m);
        }
      return picked.map((m) => {
        m.status = "inflight";
        m.ready = 0;
        m.locked_by = req.worker;
        m.lease_expires_at = req.now + req.leaseMs;
        m.attempts++;
        m.updated_at = req.now;
        this.saveMsg(m);
        return toClaimed(m);
      });
    });
  }

  settle(settlements: readonly Settlement[], now: number): EngineSettleResult {
    this.check();
    const rows = settlements.map((s) => this.msg(s.id));
    const live = settlements.some((s, i) => {
      const m = rows[i];
      return (
        m !== undefined && m.status === "inflight" && m.locked_by === s.worker && m.attempts === s.attempt
      );
    });
    if (!live) return { applied: [], signals: [] };
    return this.write(() => {
      const applied: string[] = [];
      const signals = new Set<string>();
      for (const s of settlements) {
        const m = this.msg(s.id);
        // Fencing: only the current holder of this very attempt may settle.
        if (
          m === undefined ||
          m.status !== "inflight" ||
          m.locked_by !== s.worker ||
          m.attempts !== s.attempt
        )
          continue;
        if (s.failure !== undefined) {
          const failures = JSON.parse(m.failures) as FailureReason[];
          const f = s.failure;
          failures.push({ code: f.code, message: f.message, at: f.at, attempt: f.attempt });
          m.failures = JSON.stringify(failures);
        }
        m.status = s.status;
        m.locked_by = null;
        m.lease_expires_at = null;
        m.updated_at = now;
        m.ready = s.status === "pending" && m.key === null ? 1 : 0;
        this.saveMsg(m);
        if (m.key !== null) this.advanceKey(m.signal, m.key);
        applied.push(m.id);
        // Only a settle that makes work claimable is announced (StoreEvent "settled").
        if (s.status === "pending" || m.key !== null) signals.add(m.signal);
      }
      return { applied, signals: [...signals] };
    });
  }

  private dead(signal: string, limit: number): MsgRow[] {
    return this.all<MsgRow>(
      "SELECT * FROM messages WHERE signal = ? AND status = 'dead' ORDER BY created_at, seq LIMIT ?",
      signal,
      limit,
    );
  }

  deadLetters(signal: string, limit?: number): StoredMessage[] {
    this.check();
    return this.dead(signal, limit === undefined ? -1 : Math.max(0, limit)).map(toStored);
  }

  getMessage(id: string): StoredMessage | undefined {
    this.check();
    const m = this.msg(id);
    return m === undefined ? undefined : toStored(m);
  }

  private deadTargets(signal: string, ids: readonly string[] | "all"): MsgRow[] {
    if (ids === "all") return this.dead(signal, -1);
    const out: MsgRow[] = [];
    for (const id of new Set(ids)) {
      const m = this.msg(id);
      if (m !== undefined && m.signal === signal && m.status === "dead") out.push(m);
    }
    return out;
  }

  /** Dead -> pending with attempts and lock reset; the failure history is kept. */
  replay(signal: string, ids: readonly string[] | "all", now: number): string[] {
    this.check();
    const targets = this.deadTargets(signal, ids);
    if (targets.length === 0) return [];
    return this.write(() => {
      const keys = new Set<string>();
      for (const m of targets) {
        m.status = "pending";
        m.attempts = 0;
        m.locked_by = null;
        m.lease_expires_at = null;
        m.updated_at = now;
        m.ready = m.key === null ? 1 : 0;
        this.saveMsg(m);
        this.run("UPDATE messages SET replays = replays + 1 WHERE seq = ?", m.seq);
        if (m.key !== null) keys.add(m.key);
      }
      for (const k of keys) this.refreshKey(signal, k);
      return targets.map((m) => m.id);
    });
  }

  discard(signal: string, ids: readonly string[] | "all"): string[] {
    this.check();
    const targets = this.deadTargets(signal, ids);
    if (targets.length === 0) return [];
    return this.write(() => {
      for (const m of targets) this.run("DELETE FROM messages WHERE seq = ?", m.seq);
      return targets.map((m) => m.id);
    });
  }

  stats(signal: string, now: number): SignalStats {
    this.check();
    const counts = new Map(
      this.all<{ status: MessageStatus; n: number }>(
        "SELECT status, count(*) AS n FROM messages WHERE signal = ? GROUP BY status",
        signal,
      ).map((r) => [r.status, r.n]),
    );
    const oldest = this.get<{ created_at: number }>(
      "SELECT created_at FROM messages WHERE signal = ? AND status = 'pending' ORDER BY created_at, seq LIMIT 1",
      signal,
    );
    return {
      signal,
      pending: counts.get("pending") ?? 0,
      inflight: counts.get("inflight") ?? 0,
      dead: counts.get("dead") ?? 0,
      delivered: counts.get("delivered") ?? 0,
      oldestPendingAgeMs: oldest === undefined ? null : Math.max(0, now - oldest.created_at),
    };
  }

  nextLeaseExpiry(signal: string): number | null {
    this.check();
    return (
      this.get<{ t: number }>(
        `SELECT lease_expires_at AS t FROM messages WHERE signal = ? AND status = 'inflight'
           ORDER BY lease_expires_at LIMIT 1`,
        signal,
      )?.t ?? null
    );
  }

  pruneDelivered(before: number): number {
    this.check();
    if (
      this.get("SELECT 1 FROM messages WHERE status = 'delivered' AND updated_at < ? LIMIT 1", before) ===
      undefined
    )
      return 0;
    return this.write(() =>
      this.run("DELETE FROM messages WHERE status = 'delivered' AND updated_at < ?", before),
    );
  }

  // Journal

  private runRow(runId: string): RunRow | undefined {
    return this.get<RunRow>("SELECT * FROM runs WHERE id = ?", runId);
  }

  private mustGet(runId: string): RunRow {
    const r = this.runRow(runId);
    if (r === undefined) throw storeErrors.runNotFound(runId);
    return r;
  }

  private holder(runId: string, owner: string): RunRow {
    const r = this.mustGet(runId);
    assertHolder(stateOfRow(r), owner);
    return r;
  }

  private setStatus(r: RunRow, status: RunStatus): void {
    if (r.status === status) return;
    r.status = status;
    r.status_seq = ++this.statusSeq;
  }

  /** Writes a state a rule decided onto the row, and saves it. */
  private apply(r: RunRow, s: RunState): void {
    this.setStatus(r, s.status);
    r.lease_owner = s.leaseOwner;
    r.lease_expires_at = s.leaseExpiresAt;
    r.wake_at = s.wakeAt;
    r.recoveries = s.recoveries;
    r.updated_at = s.updatedAt;
    this.saveRun(r);
  }

  private saveRun(r: RunRow): void {
    r.deadline = runDeadline(stateOfRow(r));
    this.run(
      `UPDATE runs SET status = ?, output = ?, error = ?, lease_owner = ?, lease_expires_at = ?, wake_at = ?,
         deadline = ?, status_seq = ?, recoveries = ?, updated_at = ? WHERE id = ?`,
      r.status,
      r.output,
      r.error,
      r.lease_owner,
      r.lease_expires_at,
      r.wake_at,
      r.deadline,
      r.status_seq,
      r.recoveries,
      r.updated_at,
      r.id,
    );
  }

  private entries(runId: string): JournalEntry[] {
    return this.all<EntryRow>("SELECT * FROM journal_entries WHERE run_id = ? ORDER BY seq", runId).map(
      toEntry,
    );
  }

  private insertEntries(runId: string, entries: readonly JournalEntry[]): void {
    for (const e of entries)
      this.run(
        `INSERT INTO journal_entries (run_id, seq, kind, name, value, error, duration, wake_at, at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        runId,
        e.seq,
        e.kind,
        nameOf(e),
        enc(e.value),
        e.error === undefined ? null : JSON.stringify({ code: e.error.code, message: e.error.message }),
        e.kind === "sleep" ? e.duration : null,
        e.kind === "sleep" ? e.wakeAt : null,
        e.at,
      );
  }

  private checkSeqs(runId: string, entries: readonly JournalEntry[]): void {
    const batch = new Set<number>();
    for (const e of entries) {
      if (
        batch.has(e.seq) ||
        this.get("SELECT 1 FROM journal_entries WHERE run_id = ? AND seq = ?", runId, e.seq) !== undefined
      )
        throw storeErrors.duplicateSeq(runId, e.seq);
      batch.add(e.seq);
    }
  }

  /** claimDueRuns' take: reserves a sleeper claimed ahead of its wake, takes anything else (claimLease). */
  private claimRun(r: RunRow, owner: string, now: number, leaseMs: number): AcquiredRun {
    this.apply(r, claimLease(stateOfRow(r), owner, now, leaseMs));
    return { run: toRun(r), entries: this.entries(r.id), created: false };
  }

  /** Takes the run's lease for `owner`: refused for terminal runs and live leases of others (takeLease). */
  private take(r: RunRow, owner: string, now: number, leaseMs: number): AcquiredRun {
    this.apply(r, takeLease(stateOfRow(r), owner, now, leaseMs));
    return { run: toRun(r), entries: this.entries(r.id), created: false };
  }

  startRun(req: StartRun): AcquiredRun {
    this.check();
    return this.write(() => {
      const existing = this.runRow(req.id);
      if (existing !== undefined) return this.take(existing, req.owner, req.now, req.leaseMs);
      const r: RunRow = {
        id: req.id,
        flow: req.flow,
        status: "running",
        input: enc(req.input),
        output: null,
        error: null,
        parent_run_id: req.parentRunId,
        lease_owner: req.owner,
        lease_expires_at: req.now + req.leaseMs,
        wake_at: null,
        deadline: req.now + req.leaseMs,
        status_seq: ++this.statusSeq,
        recoveries: 0,
        created_at: req.now,
        updated_at: req.now,
      };
      this.run(
        `INSERT INTO runs (id, flow, status, input, output, error, parent_run_id, lease_owner, lease_expires_at,
           wake_at, deadline, status_seq, created_at, updated_at)
         VALUES (?, ?, ?, ?, NULL, NULL, ?, ?, ?, NULL, ?, ?, ?, ?)`,
        r.id,
        r.flow,
        r.status,
        r.input,
        r.parent_run_id,
        r.lease_owner,
        r.lease_expires_at,
        r.deadline,
        r.status_seq,
        r.created_at,
        r.updated_at,
      );
      return { run: toRun(r), entries: [], created: true };
    });
  }

  acquireRun(req: LeaseRequest): AcquiredRun {
    this.check();
    const r = this.mustGet(req.runId);
    return this.write(() => this.take(r, req.owner, req.now, req.leaseMs));
  }

  renewLease(req: LeaseRequest): void {
    this.check();
    const r = this.holder(req.runId, req.owner);
    r.lease_expires_at = req.now + req.leaseMs;
    r.updated_at = req.now;
    this.write(() => this.saveRun(r));
  }

  /**
   * True when this append was committed already: each entry sits at its seq
   * with the same kind, name and content (a retry after the first reply was
   * lost); it then writes nothing, its emits included. Same positions, kinds
   * and names with another content is no retry: refused with OKE1313.
   */
  private alreadyAppended(req: Pick<AppendRequest, "runId" | "owner" | "entries">): boolean {
    this.holder(req.runId, req.owner);
    if (req.entries.length === 0) return false;
    const batch = new Set<number>();
    let differs: JournalEntry | undefined;
    for (const e of req.entries) {
      if (batch.has(e.seq)) return false;
      batch.add(e.seq);
      const at = this.get<EntryRow>(
        "SELECT * FROM journal_entries WHERE run_id = ? AND seq = ?",
        req.runId,
        e.seq,
      );
      if (at === undefined || at.kind !== e.kind || at.name !== nameOf(e)) return false;
      if (differs === undefined && !sameEntryContent(toEntry(at), e)) differs = e;
    }
    if (differs !== undefined)
      throw storeErrors.entryDiffers(req.runId, differs.seq, differs.kind, nameOf(differs));
    return true;
  }

  /** Entries and emits commit together: both are checked before either is written. */
  append(req: AppendRequest): void {
    this.check();
    if (this.alreadyAppended(req)) return;
    const r = this.holder(req.runId, req.owner);
    this.checkSeqs(r.id, req.entries);
    if (req.emits !== undefined) this.checkEnqueue(req.emits);
    this.write(() => {
      this.insertEntries(r.id, req.entries);
      if (req.leaseMs !== undefined) r.lease_expires_at = req.now + req.leaseMs;
      r.updated_at = req.now;
      this.saveRun(r);
      if (req.emits !== undefined && req.emits.length > 0) this.insertMessages(req.emits, req.now);
    });
  }

  park(req: ParkRequest): void {
    this.check();
    const r = this.holder(req.runId, req.owner);
    this.checkSeqs(r.id, [req.entry]);
    this.write(() => {
      this.insertEntries(r.id, [req.entry]);
      this.apply(r, parkState(stateOfRow(r), req));
    });
  }

  finish(req: FinishRequest): void {
    this.check();
    const r = this.holder(req.runId, req.owner);
    const { state, error } = finishState(stateOfRow(r), req);
    r.output = enc(req.output);
    r.error = error === undefined ? null : JSON.stringify(error);
    this.write(() => this.apply(r, state));
  }

  /** running → compensating, fenced like a write; the failure becomes the run's error. */
  beginCompensation(req: BeginCompensationRequest): void {
    this.check();
    const r = this.holder(req.runId, req.owner);
    if (r.status !== "running") throw new JournalLeaseBusy(req.runId);
    this.setStatus(r, "compensating");
    r.error = JSON.stringify({ code: req.error.code, message: req.error.message });
    r.updated_at = req.now;
    this.write(() => this.saveRun(r));
  }

  releaseRun(req: ReleaseRequest): boolean {
    this.check();
    const r = this.runRow(req.runId);
    if (r === undefined || r.lease_owner !== req.owner) return false;
    const state = releaseState(stateOfRow(r), req);
    this.write(() => this.apply(r, state));
    return true;
  }

  /**
   * Due runs, earliest first, ties by id, per flow through runs_due_by_flow: deadline <= now, and
   * sleepers with wake_at <= dueBy (>= now; a live lease is never due before now) — wake-rules
   * passedByWalk in SQL.
   */
  private due(now: number, dueBy: number, max: number, flows: readonly string[] | undefined): RunRow[] {
    if (flows === undefined)
      return this.all<RunRow>(
        `SELECT * FROM runs WHERE deadline IS NOT NULL AND deadline <= ?
             AND (deadline <= ? OR (status = 'sleeping' AND (lease_owner IS NULL OR lease_expires_at <= ?)))
           ORDER BY deadline, id LIMIT ?`,
        dueBy,
        now,
        now,
        max,
      );
    const out: RunRow[] = [];
    for (const flow of new Set(flows))
      out.push(
        ...this.all<RunRow>(
          `SELECT * FROM runs WHERE flow = ? AND deadline IS NOT NULL AND deadline <= ?
             AND (deadline <= ? OR (status = 'sleeping' AND (lease_owner IS NULL OR lease_expires_at <= ?)))
             ORDER BY deadline, id LIMIT ?`,
          flow,
          dueBy,
          now,
          now,
          max,
        ),
      );
    out.sort((a, b) => a.deadline! - b.deadline! || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    return out.slice(0, max);
  }

  /** Due runs among `ids` (primary-key lookups): the same eligibility and order as the index walk. */
  private dueByIds(req: ClaimDueRunsRequest, dueBy: number, ids: readonly string[]): RunRow[] {
    const flows = req.flows === undefined ? undefined : new Set(req.flows);
    const due: RunRow[] = [];
    for (const id of new Set(ids)) {
      const r = this.runRow(id);
      if (r === undefined || dueForClaim(stateOfRow(r), req.owner, req.now, dueBy) === null) continue;
      if (flows === undefined || flows.has(r.flow)) due.push(r);
    }
    due.sort((a, b) => a.deadline! - b.deadline! || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    return due.slice(0, req.max);
  }

  claimDueRuns(req: ClaimDueRunsRequest): AcquiredRun[] {
    this.check();
    if (req.max <= 0) return [];
    const dueBy = sleepersHorizon(req.now, req.sleepersDueBy);
    const due =
      req.runIds === undefined
        ? this.due(req.now, dueBy, req.max, req.flows)
        : this.dueByIds(req, dueBy, req.runIds);
    if (due.length === 0) return [];
    return this.write(() =>
      due.map((r) => {
        const dueAt = dueAtFor(stateOfRow(r), req.owner)!;
        return { ...this.claimRun(r, req.owner, req.now, req.leaseMs), dueAt };
      }),
    );
  }

  listOrphans(now: number, limit = Infinity, filter: RunFlowFilter = {}): RunRecord[] {
    this.check();
    const flows = filter.flows === undefined ? undefined : new Set(filter.flows);
    const out: RunRecord[] = [];
    const cap = Number.isFinite(limit) ? Math.max(0, limit) : -1;
    for (const status of ["running", "compensating", "sleeping"] as const) {
      if (cap >= 0 && out.length >= cap) break;
      // Only runs without a live lease (a sleeping run never holds one), in the order they entered the status.
      for (const r of this.stmt(
        `SELECT * FROM runs WHERE status = ? AND (lease_owner IS NULL OR lease_expires_at IS NULL
           OR lease_expires_at <= ?) ORDER BY status_seq`,
      ).iterate(status, status === "sleeping" ? Number.MAX_SAFE_INTEGER : now) as IterableIterator<RunRow>) {
        if (flows !== undefined && !flows.has(r.flow)) continue;
        out.push(toRun(r));
        if (cap >= 0 && out.length >= cap) break;
      }
    }
    return out;
  }

  nextWakeAt(filter: RunFlowFilter = {}): number | null {
    this.check();
    if (filter.flows === undefined)
      return (
        this.get<{ d: number }>(
          "SELECT deadline AS d FROM runs WHERE deadline IS NOT NULL ORDER BY deadline LIMIT 1",
        )?.d ?? null
      );
    let best: number | null = null;
    for (const flow of new Set(filter.flows)) {
      const d = this.get<{ d: number }>(
        "SELECT deadline AS d FROM runs WHERE flow = ? AND deadline IS NOT NULL ORDER BY deadline LIMIT 1",
        flow,
      )?.d;
      if (d !== undefined && (best === null || d < best)) best = d;
    }
    return best;
  }

  wakeEarly(runId: string, now: number): boolean {
    this.check();
    const r = this.runRow(runId);
    if (r === undefined || r.status !== "sleeping") return false;
    if (r.wake_at === null || r.wake_at > now) r.wake_at = now;
    r.updated_at = now;
    this.write(() => this.saveRun(r));
    return true;
  }

  getRun(runId: string): RunRecord | undefined {
    this.check();
    const r = this.runRow(runId);
    return r === undefined ? undefined : toRun(r);
  }

  getJournal(runId: string): JournalEntry[] {
    this.check();
    return this.entries(runId);
  }

  /** Matching runs, oldest first (createdAt, then id). */
  listRuns(filter: { status?: RunStatus; flow?: string; limit?: number }): RunRecord[] {
    this.check();
    const where: string[] = [];
    const params: unknown[] = [];
    if (filter.status !== undefined) {
      where.push("status = ?");
      params.push(filter.status);
    }
    if (filter.flow !== undefined) {
      where.push("flow = ?");
      params.push(filter.flow);
    }
    const limit = filter.limit === undefined ? -1 : Math.max(0, filter.limit);
    return this.all<RunRow>(
      `SELECT * FROM runs ${where.length > 0 ? `WHERE ${where.join(" AND ")}` : ""}
         ORDER BY created_at, id LIMIT ?`,
      ...params,
      limit,
    ).map(toRun);
  }

  // Console

  pageMessages(req: MessagePageRequest): Page<StoredMessage> {
    this.check();
    const limit = Math.max(0, req.limit);
    const c = req.cursor ? decodeCursor(req.cursor) : undefined;
    const after = c ? ([c[0], Number(c[1])] as const) : undefined;
    let rows: MsgRow[];
    let keyOf: (m: MsgRow) => [number, number];
    if (req.status === "dead") {
      keyOf = (m) => [m.created_at, m.seq];
      rows = this.all<MsgRow>(
        `SELECT * FROM messages WHERE signal = ? AND status = 'dead'
           AND (created_at > ? OR (created_at = ? AND seq > ?)) ORDER BY created_at, seq LIMIT ?`,
        req.signal,
        after?.[0] ?? -Number.MAX_VALUE,
        after?.[0] ?? -Number.MAX_VALUE,
        after?.[1] ?? -Number.MAX_VALUE,
        limit + 1,
      );
    } else if (req.status === "delivered") {
      keyOf = (m) => [m.updated_at, m.seq];
      rows = this.all<MsgRow>(
        `SELECT * FROM messages WHERE signal = ? AND status = 'delivered'
           AND (updated_at < ? OR (updated_at = ? AND seq < ?)) ORDER BY updated_at DESC, seq DESC LIMIT ?`,
        req.signal,
        after?.[0] ?? Number.MAX_VALUE,
        after?.[0] ?? Number.MAX_VALUE,
        after?.[1] ?? Number.MAX_VALUE,
        limit + 1,
      );
    } else {
      keyOf = (m) => [0, m.seq];
      // The cursor's first part is 0 for these; a later one would mean "past everything" (memory driver).
      const past = after !== undefined && after[0] > 0;
      rows = past
        ? []
        : this.all<MsgRow>(
            "SELECT * FROM messages WHERE signal = ? AND status = ? AND seq > ? ORDER BY seq LIMIT ?",
            req.signal,
            req.status,
            after === undefined || after[0] < 0 ? -Number.MAX_VALUE : after[1],
            limit + 1,
          );
    }
    const page = rows.slice(0, limit);
    const last = page.at(-1);
    return {
      items: page.map(toStored),
      next: rows.length > page.length && last ? encodeCursor(...keyOf(last)) : null,
    };
  }

  pageRuns(req: RunPageRequest): Page<RunRecord> {
    this.check();
    const limit = Math.max(0, req.limit);
    const where: string[] = [];
    const params: unknown[] = [];
    const add = (sql: string, ...p: unknown[]): void => {
      where.push(sql);
      params.push(...p);
    };
    if (req.status !== undefined) add("status = ?", req.status);
    if (req.flow !== undefined) add("flow = ?", req.flow);
    if (req.parentRunId !== undefined) add("parent_run_id IS ?", req.parentRunId);
    if (req.since !== undefined) add("created_at >= ?", req.since);
    if (req.until !== undefined) add("created_at < ?", req.until);
    const c = req.cursor ? decodeCursor(req.cursor) : undefined;
    if (c) add("(created_at < ? OR (created_at = ? AND id < ?))", c[0], c[0], c[1]);
    const rows = this.all<RunRow>(
      `SELECT * FROM runs ${where.length > 0 ? `WHERE ${where.join(" AND ")}` : ""}
         ORDER BY created_at DESC, id DESC LIMIT ?`,
      ...params,
      limit + 1,
    );
    const page = rows.slice(0, limit);
    const last = page.at(-1);
    return {
      items: page.map(toRun),
      next: rows.length > page.length && last ? encodeCursor(last.created_at, last.id) : null,
    };
  }

  runCounts(): Array<{ flow: string; status: RunStatus; count: number }> {
    this.check();
    return this.all<{ flow: string; status: RunStatus; count: number }>(
      "SELECT flow, status, count(*) AS count FROM runs GROUP BY flow, status ORDER BY flow, status",
    );
  }

  throughput(from: number, bucketMs: number, now: number): Throughput[] {
    this.check();
    const n = Math.max(1, Math.ceil((now - from) / bucketMs));
    const out = new Map<string, Throughput>();
    for (const m of this.stmt(
      `SELECT signal, updated_at FROM messages WHERE status = 'delivered' AND updated_at >= ? AND updated_at < ?`,
    ).iterate(from, from + n * bucketMs) as IterableIterator<{ signal: string; updated_at: number }>) {
      let t = out.get(m.signal);
      if (!t) {
        t = { signal: m.signal, from, bucketMs, delivered: new Array<number>(n).fill(0) };
        out.set(m.signal, t);
      }
      t.delivered[Math.floor((m.updated_at - from) / bucketMs)]!++;
    }
    return [...out.values()].sort((a, b) => (a.signal < b.signal ? -1 : 1));
  }

  heartbeat(info: InstanceInfo, now: number): void {
    this.check();
    const rec: InstanceRecord = { ...(JSON.parse(JSON.stringify(info)) as InstanceInfo), seenAt: now };
    this.write(() =>
      this.run(
        `INSERT INTO instances (id, started_at, seen_at, doc) VALUES (?, ?, ?, ?)
         ON CONFLICT (id) DO UPDATE SET started_at = excluded.started_at, seen_at = excluded.seen_at, doc = excluded.doc`,
        info.id,
        info.startedAt,
        now,
        JSON.stringify(rec),
      ),
    );
  }

  removeInstance(id: string): boolean {
    this.check();
    if (this.get("SELECT 1 FROM instances WHERE id = ?", id) === undefined) return false;
    this.write(() => this.run("DELETE FROM instances WHERE id = ?", id));
    return true;
  }

  listInstances(since: number): InstanceRecord[] {
    this.check();
    return this.all<{ doc: string }>(
      "SELECT doc FROM instances WHERE seen_at >= ? ORDER BY started_at, id",
      since,
    ).map((r) => JSON.parse(r.doc) as InstanceRecord);
  }

  recordAudit(entry: AuditEntry): AuditRecord {
    this.check();
    return this.write(() => {
      const id = (this.get<{ m: number | null }>("SELECT max(id) AS m FROM audit")?.m ?? 0) + 1;
      const rec = { id, ...(JSON.parse(JSON.stringify(entry)) as AuditEntry) };
      this.run("INSERT INTO audit (id, doc) VALUES (?, ?)", id, JSON.stringify(rec));
      return rec;
    });
  }

  pageAudit(req: { cursor?: string | null; limit: number }): Page<AuditRecord> {
    this.check();
    const beforeId = req.cursor ? Number(req.cursor) : Number.MAX_SAFE_INTEGER;
    const limit = Math.max(0, req.limit);
    const rows = this.all<{ doc: string }>(
      "SELECT doc FROM audit WHERE id < ? ORDER BY id DESC LIMIT ?",
      Number.isNaN(beforeId) ? Number.MAX_SAFE_INTEGER : beforeId,
      limit + 1,
    ).map((r) => JSON.parse(r.doc) as AuditRecord);
    const items = rows.slice(0, limit);
    return { items, next: rows.length > items.length && items.length > 0 ? String(items.at(-1)!.id) : null };
  }

  // Schedules

  private schedule(name: string): ScheduleRecord | undefined {
    const r = this.get<{ doc: string }>("SELECT doc FROM schedules WHERE name = ?", name);
    return r === undefined ? undefined : (JSON.parse(r.doc) as ScheduleRecord);
  }

  private putSchedule(r: ScheduleRecord): void {
    this.run(
      `INSERT INTO schedules (name, last_slot, doc) VALUES (?, ?, ?)
       ON CONFLICT (name) DO UPDATE SET last_slot = excluded.last_slot, doc = excluded.doc`,
      r.name,
      r.lastSlot,
      JSON.stringify(r),
    );
  }

  reconcileSchedules(declared: readonly DeclaredSchedule[], now: number): ScheduleRecord[] {
    this.check();
    const current = this.listSchedules();
    this.write(() => {
      for (const r of planReconcile(current, declared, now)) this.putSchedule(r);
    });
    return this.listSchedules();
  }

  listSchedules(): ScheduleRecord[] {
    this.check();
    return this.all<{ doc: string }>("SELECT doc FROM schedules")
      .map((r) => JSON.parse(r.doc) as ScheduleRecord)
      .sort((a, b) => a.name.localeCompare(b.name));
  }

  getSchedule(name: string): ScheduleRecord | undefined {
    this.check();
    return this.schedule(name);
  }

  setSchedulePaused(name: string, paused: boolean, now: number): ScheduleRecord | undefined {
    this.check();
    const r = this.schedule(name);
    if (r === undefined) return undefined;
    const next = applyPaused(r, paused, now);
    this.write(() => this.putSchedule(next));
    return cloneSchedule(next);
  }

  overrideSchedule(name: string, spec: ScheduleSpec | null, now: number): ScheduleRecord | undefined {
    this.check();
    const r = this.schedule(name);
    if (r === undefined) return undefined;
    const next = applyOverride(r, spec, now);
    this.write(() => this.putSchedule(next));
    return cloneSchedule(next);
  }

  /** The fired slot and its message commit together: both are checked before either is written. */
  fire(req: FireRequest): boolean {
    this.check();
    const r = this.schedule(req.name);
    if (!fireApplies(r, req)) return false;
    if (
      this.get("SELECT 1 FROM schedule_fires WHERE name = ? AND slot = ?", req.name, req.slot) !== undefined
    )
      return false;
    this.checkEnqueue([req.message]);
    this.write(() => {
      this.putSchedule(applyFire(r, req));
      this.run(
        "INSERT INTO schedule_fires (name, slot, fired_at, missed_runs, message_id) VALUES (?, ?, ?, ?, ?)",
        req.name,
        req.slot,
        req.now,
        req.missedRuns,
        req.message.id,
      );
      this.insertMessages([req.message], req.now);
    });
    return true;
  }

  recordScheduleError(name: string, error: ScheduleError | null, now: number): boolean {
    this.check();
    const r = this.schedule(name);
    if (r === undefined) return false;
    if (error === null && r.lastError === null) return false;
    this.write(() =>
      this.putSchedule({
        ...cloneSchedule(r),
        lastError: error === null ? null : { ...error },
        updatedAt: now,
      }),
    );
    return true;
  }

  listFires(name: string, limit = 100): ScheduleFire[] {
    this.check();
    return this.all<{
      name: string;
      slot: number;
      fired_at: number;
      missed_runs: number;
      message_id: string;
    }>(
      "SELECT * FROM schedule_fires WHERE name = ? ORDER BY slot DESC LIMIT ?",
      name,
      Math.max(0, limit),
    ).map((f) => ({
      name: f.name,
      slot: f.slot,
      firedAt: f.fired_at,
      missedRuns: f.missed_runs,
      messageId: f.message_id,
    }));
  }

  pruneFires(before: number): number {
    this.check();
    // A schedule's latest fire stays: it is what a restarted scheduler resumes from.
    const sql = `FROM schedule_fires WHERE fired_at < ?
      AND slot IS NOT (SELECT last_slot FROM schedules s WHERE s.name = schedule_fires.name)`;
    if (this.get(`SELECT 1 ${sql} LIMIT 1`, before) === undefined) return 0;
    return this.write(() => this.run(`DELETE ${sql}`, before));
  }

  // Retention

  prunableRuns(before: number, limit: number): string[] {
    this.check();
    const out: string[] = [];
    for (const status of ["completed", "failed"] as const) {
      if (out.length >= limit) break;
      for (const r of this.all<{ id: string }>(
        "SELECT id FROM runs WHERE status = ? AND updated_at < ? ORDER BY status_seq LIMIT ?",
        status,
        before,
        Math.max(0, limit - out.length),
      ))
        out.push(r.id);
    }
    return out;
  }

  /** Deletes finished runs and their journals (retention); live ids are skipped. */
  removeRuns(ids: readonly string[]): number {
    this.check();
    if (ids.length === 0) return 0;
    return this.write(() => {
      let n = 0;
      for (const id of ids) {
        if (this.run("DELETE FROM runs WHERE id = ? AND status IN ('completed', 'failed')", id) === 0)
          continue;
        this.run("DELETE FROM journal_entries WHERE run_id = ?", id);
        n++;
      }
      return n;
    });
  }

  // Idempotency keys

  private idem(key: string): IdempotencyRecord | undefined {
    const r = this.get<IdemRow>("SELECT * FROM idempotency_keys WHERE key = ?", key);
    return r === undefined ? undefined : toIdem(r);
  }

  private putIdem(r: IdempotencyRecord): void {
    this.run(
      `INSERT INTO idempotency_keys (key, fingerprint, status, response, run_id, locked_until, created_at, expires_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (key) DO UPDATE SET fingerprint = excluded.fingerprint, status = excluded.status,
         response = excluded.response, run_id = excluded.run_id, locked_until = excluded.locked_until,
         created_at = excluded.created_at, expires_at = excluded.expires_at`,
      r.key,
      r.fingerprint,
      r.status,
      r.response === null ? null : JSON.stringify(r.response),
      r.runId,
      r.lockedUntil,
      r.createdAt,
      r.expiresAt,
    );
  }

  /** idempotency-rules decideClaim over the key's row. */
  claimIdempotency(req: ClaimIdempotencyRequest): { claim: IdempotencyClaim; changed: boolean } {
    this.check();
    const { claim, write } = decideClaim(this.idem(req.key), req);
    if (write !== null) this.write(() => this.putIdem(write));
    return { claim, changed: write !== null };
  }

  private runningIdem(key: string, fingerprint: string): IdempotencyRecord | undefined {
    const r = this.idem(key);
    return runningFor(r, fingerprint) ? r : undefined;
  }

  renewIdempotency(req: { key: string; fingerprint: string; now: number; lockMs: number }): boolean {
    this.check();
    const r = this.runningIdem(req.key, req.fingerprint);
    if (r === undefined) return false;
    r.lockedUntil = req.now + req.lockMs;
    this.write(() => this.putIdem(r));
    return true;
  }

  completeIdempotency(req: CompleteIdempotencyRequest): CompleteOutcome {
    this.check();
    const { outcome, write } = decideComplete(this.idem(req.key), req);
    if (write !== null) this.write(() => this.putIdem(write));
    return outcome;
  }

  releaseIdempotency(req: { key: string; fingerprint: string }): boolean {
    this.check();
    if (this.runningIdem(req.key, req.fingerprint) === undefined) return false;
    this.write(() => this.run("DELETE FROM idempotency_keys WHERE key = ?", req.key));
    return true;
  }

  getIdempotency(key: string): IdempotencyRecord | undefined {
    this.check();
    return this.idem(key);
  }

  pruneIdempotency(before: number): number {
    this.check();
    if (this.get("SELECT 1 FROM idempotency_keys WHERE expires_at <= ? LIMIT 1", before) === undefined)
      return 0;
    return this.write(() => this.run("DELETE FROM idempotency_keys WHERE expires_at <= ?", before));
  }

  // Live tapes: positions come from one counter for all tapes, persisted in meta.

  appendTape(entries: readonly NewTapeEntry[], now: number): TapeEntry[] {
    this.check();
    const out: TapeEntry[] = [];
    const seen = new Set<string>();
    let last = this.tapeLast === 0 ? Date.now() * 1000 : this.tapeLast;
    for (const e of entries) {
      const k = JSON.stringify([e.signal, e.key, e.id]);
      if (
        seen.has(k) ||
        this.get(
          "SELECT 1 FROM tape_entries WHERE signal = ? AND key = ? AND id = ?",
          e.signal,
          e.key,
          e.id,
        ) !== undefined
      )
        continue;
      seen.add(k);
      out.push({
        id: e.id,
        signal: e.signal,
        key: e.key,
        payload: dec(enc(e.payload)),
        position: ++last,
        createdAt: now,
      });
    }
    if (out.length === 0) return out;
    this.write(() => {
      for (const t of out)
        this.run(
          "INSERT INTO tape_entries (signal, key, position, id, payload, created_at) VALUES (?, ?, ?, ?, ?, ?)",
          t.signal,
          t.key,
          t.position,
          t.id,
          enc(t.payload),
          t.createdAt,
        );
      this.run(
        "INSERT INTO meta (k, v) VALUES ('tape_last', ?) ON CONFLICT (k) DO UPDATE SET v = excluded.v",
        last,
      );
    });
    this.tapeLast = last;
    return out;
  }

  readTape(req: TapeRead): TapeEntry[] {
    this.check();
    return this.all<TapeRow>(
      `SELECT * FROM tape_entries WHERE signal = ? AND key = ? AND position > ? AND position <= ?
         AND created_at >= ? ORDER BY position LIMIT ?`,
      req.signal,
      req.key,
      req.after,
      req.upTo ?? Number.MAX_SAFE_INTEGER,
      req.notBefore,
      Math.max(0, req.limit),
    ).map(toTape);
  }

  tapeHead(signal: string, key: string): number {
    this.check();
    return (
      this.get<{ p: number | null }>(
        "SELECT max(position) AS p FROM tape_entries WHERE signal = ? AND key = ?",
        signal,
        key,
      )?.p ?? 0
    );
  }

  prunableTape(signal: string, before: number, limit: number): TapeCut[] {
    this.check();
    const cuts: TapeCut[] = [];
    let count = 0;
    for (const { key } of this.all<{ key: string }>(
      "SELECT DISTINCT key FROM tape_entries WHERE signal = ? ORDER BY key",
      signal,
    )) {
      if (count >= limit) break;
      let upTo: number | undefined;
      for (const e of this.all<{ position: number; created_at: number }>(
        "SELECT position, created_at FROM tape_entries WHERE signal = ? AND key = ? ORDER BY position LIMIT ?",
        signal,
        key,
        limit - count,
      )) {
        if (e.created_at >= before) break;
        upTo = e.position;
        count++;
      }
      if (upTo !== undefined) cuts.push({ key, upTo });
    }
    return cuts;
  }

  cutTape(signal: string, cuts: readonly TapeCut[]): number {
    this.check();
    if (cuts.length === 0) return 0;
    return this.write(() => {
      let n = 0;
      for (const c of cuts)
        n += this.run(
          "DELETE FROM tape_entries WHERE signal = ? AND key = ? AND position <= ?",
          signal,
          c.key,
          c.upTo,
        );
      return n;
    });
  }
}

/** A SQLite error that means the disk did not take the write (full, I/O, read-only), not a bad call. */
export function isIoFailure(e: unknown): boolean {
  const code = (e as { code?: unknown } | null)?.code;
  return (
    typeof code === "string" &&
    (code.startsWith("SQLITE_FULL") ||
      code.startsWith("SQLITE_IOERR") ||
      code.startsWith("SQLITE_READONLY") ||
      code.startsWith("SQLITE_CANTOPEN") ||
      code.startsWith("SQLITE_CORRUPT") ||
      code.startsWith("SQLITE_NOTADB") ||
      code === "SQLITE_BUSY")
  );
}
