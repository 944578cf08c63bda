/** The file engine's journal: runs, leases, entries, sleepers, due runs, and run retention. */
import { storeErrors } from "../../index.ts";
import type {
  AcquireRequest,
  AcquiredRun,
  AppendRequest,
  ClaimDueRunsRequest,
  FinishRequest,
  JournalEntry,
  JournalEnds,
  LeaveToLeaseRequest,
  ParkRequest,
  ReleaseRequest,
  RunFlowFilter,
  RunRecord,
  RunStatus,
  StartRun,
  TerminateOutcome,
  TerminateRequest,
} from "../../types.ts";
import type { BeginCompensationRequest } from "../../compensation-types.ts";
import {
  assertHolder,
  assertTakeable,
  compensateState,
  finishState,
  parkState,
  releaseState,
  holdOf,
  renewState,
  terminateState,
  wakeEarlyState,
  wholeCount,
} from "../../journal-rules.ts";
import {
  claimLease,
  dueAtFor,
  dueForClaim,
  leaveState,
  recoveredFrom,
  runDeadline,
  sleepersHorizon,
  takeLease,
  type RunState,
} from "../../wake-rules.ts";
import { sameEntryContent, storedError } from "../../journal-same.ts";
import type { LeaseRequest } from "../../memory/memory-journal.ts";
import {
  enc,
  toRun,
  toEntry,
  nameOf,
  stateOfRow,
  keptHold,
  type RunRow,
  type EntryRow,
} from "./sqlite-rows.ts";
import type { SqliteBatch } from "./sqlite-batch.ts";
import type { SqliteQueue } from "./sqlite-queue.ts";

export class SqliteJournal {
  private statusSeq: number;

  constructor(
    private readonly b: SqliteBatch,
    private readonly queue: SqliteQueue,
  ) {
    this.statusSeq = this.b.get<{ m: number | null }>("SELECT max(status_seq) AS m FROM runs")?.m ?? 0;
  }

  private runRow(runId: string): RunRow | undefined {
    return this.b.get<RunRow>("SELECT * FROM runs WHERE id = ?", runId);
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
    this.b.run(
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
    return this.b
      .all<EntryRow>("SELECT * FROM journal_entries WHERE run_id = ? ORDER BY seq", runId)
      .map(toEntry);
  }

  private insertEntries(runId: string, entries: readonly JournalEntry[]): void {
    for (const e of entries)
      this.b.run(
        `INSERT INTO journal_entries (run_id, seq, kind, name, value, error, duration, wake_at, at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        runId,
        e.seq,
        e.kind,
        nameOf(e),
        enc(e.value),
        e.error === undefined ? null : JSON.stringify(storedError(e.error)),
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
        this.b.get("SELECT 1 FROM journal_entries WHERE run_id = ? AND seq = ?", runId, e.seq) !== undefined
      )
        throw storeErrors.duplicateSeq(runId, e.seq);
      batch.add(e.seq);
    }
  }

  /** claimDueRuns' take: reserves a sleeper claimed ahead of its wake, takes anything else (claimLease). */
  private claimRun(r: RunRow, owner: string, now: number, leaseMs: number): AcquiredRun {
    return this.taken(r, claimLease(stateOfRow(r), owner, now, leaseMs));
  }

  /** Takes the run's lease for `owner`: refused for terminal runs and live leases of others (takeLease). */
  private take(r: RunRow, owner: string, now: number, leaseMs: number): AcquiredRun {
    return this.taken(r, takeLease(stateOfRow(r), owner, now, leaseMs));
  }

  /** Writes the state a take decided; the run as taken, with whom it was recovered from if it was. */
  private taken(r: RunRow, s: RunState): AcquiredRun {
    const from = recoveredFrom(stateOfRow(r), s);
    this.apply(r, s);
    return {
      run: toRun(r),
      entries: this.entries(r.id),
      created: false,
      ...(from === undefined ? {} : { recoveredFrom: from }),
    };
  }

  startRun(req: StartRun): AcquiredRun {
    this.b.check();
    return this.b.write(() => {
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
      this.b.run(
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

  acquireRun(req: AcquireRequest): AcquiredRun {
    this.b.check();
    const r = this.mustGet(req.runId);
    assertTakeable(stateOfRow(r), req);
    return this.b.write(() => this.take(r, req.owner, req.now, req.leaseMs));
  }

  renewLease(req: LeaseRequest): void {
    this.b.check();
    const r = this.holder(req.runId, req.owner);
    const state = renewState(stateOfRow(r), req);
    this.b.write(() => this.apply(r, state));
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
      const at = this.b.get<EntryRow>(
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
    this.b.check();
    if (this.alreadyAppended(req)) return;
    const r = this.holder(req.runId, req.owner);
    this.checkSeqs(r.id, req.entries);
    if (req.emits !== undefined) this.queue.checkEnqueue(req.emits);
    this.b.write(() => {
      this.insertEntries(r.id, req.entries);
      if (req.leaseMs !== undefined) r.lease_expires_at = req.now + req.leaseMs;
      r.updated_at = req.now;
      this.saveRun(r);
      if (req.emits !== undefined && req.emits.length > 0) this.queue.insertMessages(req.emits, req.now);
    });
  }

  park(req: ParkRequest): void {
    this.b.check();
    const r = this.holder(req.runId, req.owner);
    this.checkSeqs(r.id, [req.entry]);
    this.b.write(() => {
      this.insertEntries(r.id, [req.entry]);
      this.apply(r, parkState(stateOfRow(r), req));
    });
  }

  finish(req: FinishRequest): void {
    this.b.check();
    const r = this.holder(req.runId, req.owner);
    const { state, error } = finishState(stateOfRow(r), req);
    r.output = enc(req.output);
    r.error = error === undefined ? null : JSON.stringify(error);
    this.b.write(() => this.apply(r, state));
  }

  /** running → compensating, fenced like a write; the failure becomes the run's error. */
  beginCompensation(req: BeginCompensationRequest): void {
    this.b.check();
    const r = this.holder(req.runId, req.owner);
    const { state, error } = compensateState(stateOfRow(r), req);
    r.error = JSON.stringify(error);
    this.b.write(() => this.apply(r, state));
  }

  releaseRun(req: ReleaseRequest): boolean {
    this.b.check();
    const r = this.runRow(req.runId);
    if (r === undefined || r.lease_owner !== req.owner) return false;
    const state = releaseState(stateOfRow(r), req);
    const count = this.b.get<{ n: number }>(
      "SELECT count(*) AS n FROM journal_entries WHERE run_id = ?",
      r.id,
    );
    const hold = req.hold === undefined ? null : holdOf(req, keptHold(r), count?.n ?? 0);
    this.b.write(() => {
      this.apply(r, state);
      this.b.run("UPDATE runs SET held = ? WHERE id = ?", hold === null ? null : JSON.stringify(hold), r.id);
    });
    return true;
  }

  /** A graceful stop leaves these runs to their leases (wake-rules leaveState): the ids left so. */
  leaveToLease(req: LeaveToLeaseRequest): string[] {
    this.b.check();
    const out: string[] = [];
    const changed: Array<{ r: RunRow; state: RunState }> = [];
    for (const { runId, owner } of req.runs) {
      const r = this.runRow(runId);
      if (r === undefined) continue;
      const { state, left } = leaveState(stateOfRow(r), owner, req.now);
      if (state !== null) changed.push({ r, state });
      if (left) out.push(runId);
    }
    if (changed.length > 0) this.b.write(() => changed.forEach(({ r, state }) => this.apply(r, state)));
    return out;
  }

  /**
   * Due runs, earliest first, ties by id, per flow through runs_due_by_flow: deadline <= now, and
   * sleepers with wake_at <= dueBy (>= now; a live lease is never due before now) — wake-rules
   * passedByWalk in SQL.
   */
  private due(now: number, dueBy: number, max: number, flows: readonly string[] | undefined): RunRow[] {
    if (flows === undefined)
      return this.b.all<RunRow>(
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
        ...this.b.all<RunRow>(
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
    this.b.check();
    if (req.max <= 0) return [];
    const dueBy = sleepersHorizon(req.now, req.sleepersDueBy);
    const due =
      req.runIds === undefined
        ? this.due(req.now, dueBy, req.max, req.flows)
        : this.dueByIds(req, dueBy, req.runIds);
    if (due.length === 0) return [];
    return this.b.write(() =>
      due.map((r) => {
        const dueAt = dueAtFor(stateOfRow(r), req.owner)!;
        return { ...this.claimRun(r, req.owner, req.now, req.leaseMs), dueAt };
      }),
    );
  }

  listOrphans(now: number, limit = Infinity, filter: RunFlowFilter = {}): RunRecord[] {
    this.b.check();
    const flows = filter.flows === undefined ? undefined : new Set(filter.flows);
    const out: RunRecord[] = [];
    const cap = Number.isFinite(limit) ? Math.max(0, limit) : -1;
    for (const status of ["running", "compensating", "sleeping"] as const) {
      if (cap >= 0 && out.length >= cap) break;
      // Only runs without a live lease (a sleeping run never holds one), in the order they entered the status.
      for (const r of this.b
        .stmt(
          `SELECT * FROM runs WHERE status = ? AND (lease_owner IS NULL OR lease_expires_at IS NULL
           OR lease_expires_at <= ?) ORDER BY status_seq`,
        )
        .iterate(status, status === "sleeping" ? Number.MAX_SAFE_INTEGER : now) as IterableIterator<RunRow>) {
        if (flows !== undefined && !flows.has(r.flow)) continue;
        out.push(toRun(r));
        if (cap >= 0 && out.length >= cap) break;
      }
    }
    return out;
  }

  nextWakeAt(filter: RunFlowFilter = {}): number | null {
    this.b.check();
    if (filter.flows === undefined)
      return (
        this.b.get<{ d: number }>(
          "SELECT deadline AS d FROM runs WHERE deadline IS NOT NULL ORDER BY deadline LIMIT 1",
        )?.d ?? null
      );
    let best: number | null = null;
    for (const flow of new Set(filter.flows)) {
      const d = this.b.get<{ d: number }>(
        "SELECT deadline AS d FROM runs WHERE flow = ? AND deadline IS NOT NULL ORDER BY deadline LIMIT 1",
        flow,
      )?.d;
      if (d !== undefined && (best === null || d < best)) best = d;
    }
    return best;
  }

  wakeEarly(runId: string, now: number): boolean {
    this.b.check();
    const r = this.runRow(runId);
    const state = r === undefined ? null : wakeEarlyState(stateOfRow(r), now);
    if (r === undefined || state === null) return false;
    this.b.write(() => this.apply(r, state));
    return true;
  }

  /** An operator ends the run for good unless someone holds it (journal-rules terminateState). */
  terminateRun(req: TerminateRequest): TerminateOutcome {
    this.b.check();
    const r = this.runRow(req.runId);
    if (r === undefined) return { outcome: "missing" };
    const d = terminateState(stateOfRow(r), req.now);
    if ("refused" in d) return d.refused;
    r.error = JSON.stringify({ code: req.error.code, message: req.error.message });
    this.b.write(() => this.apply(r, d.state));
    return { outcome: "terminated", run: toRun(r) };
  }

  getRun(runId: string): RunRecord | undefined {
    this.b.check();
    const r = this.runRow(runId);
    return r === undefined ? undefined : toRun(r);
  }

  getJournal(runId: string): JournalEntry[] {
    this.b.check();
    return this.entries(runId);
  }

  /** Two range reads on the (run_id, seq) key and a count: a long journal's middle is not read. */
  getJournalEnds(runId: string, head: number, tail: number): JournalEnds {
    this.b.check();
    const h = wholeCount(head);
    const t = wholeCount(tail);
    const count =
      this.b.get<{ n: number }>("SELECT count(*) AS n FROM journal_entries WHERE run_id = ?", runId)?.n ?? 0;
    if (count <= h + t) return { head: this.entries(runId), tail: [], count };
    const first = this.b
      .all<EntryRow>("SELECT * FROM journal_entries WHERE run_id = ? ORDER BY seq LIMIT ?", runId, h)
      .map(toEntry);
    const last = this.b
      .all<EntryRow>("SELECT * FROM journal_entries WHERE run_id = ? ORDER BY seq DESC LIMIT ?", runId, t)
      .map(toEntry)
      .reverse();
    return { head: first, tail: last, count };
  }

  /** Matching runs, oldest first (createdAt, then id). */
  listRuns(filter: { status?: RunStatus; flow?: string; limit?: number }): RunRecord[] {
    this.b.check();
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
    return this.b
      .all<RunRow>(
        `SELECT * FROM runs ${where.length > 0 ? `WHERE ${where.join(" AND ")}` : ""}
         ORDER BY created_at, id LIMIT ?`,
        ...params,
        limit,
      )
      .map(toRun);
  }

  prunableRuns(before: number, limit: number): string[] {
    this.b.check();
    const out: string[] = [];
    for (const status of ["completed", "failed"] as const) {
      if (out.length >= limit) break;
      for (const r of this.b.all<{ id: string }>(
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
    this.b.check();
    if (ids.length === 0) return 0;
    return this.b.write(() => {
      let n = 0;
      for (const id of ids) {
        if (this.b.run("DELETE FROM runs WHERE id = ? AND status IN ('completed', 'failed')", id) === 0)
          continue;
        this.b.run("DELETE FROM journal_entries WHERE run_id = ?", id);
        n++;
      }
      return n;
    });
  }
}
