/** SqliteEngine: the file driver's engine — the MemoryEngine's synchronous surface over SQLite tables, composed of one part per concern. */
import type Database from "better-sqlite3";
import type {
  AcquireRequest,
  AcquiredRun,
  AppendRequest,
  ClaimDueRunsRequest,
  ClaimedMessage,
  ClaimRelease,
  ClaimRequest,
  FinishRequest,
  JournalEntry,
  JournalEnds,
  LeaveToLeaseRequest,
  NewMessage,
  ParkRequest,
  ReleaseRequest,
  ResettleDelivered,
  RunFlowFilter,
  RunRecord,
  RunStatus,
  Settlement,
  SignalStats,
  StartRun,
  StoredMessage,
  TerminateOutcome,
  TerminateRequest,
} from "../../types.ts";
import type {
  AuditEntry,
  AuditRecord,
  InstanceInfo,
  InstanceRecord,
  MessagePageRequest,
  Page,
  RunPageRequest,
  QueueBacklog,
  Throughput,
} from "../../console-types.ts";
import type { BeginCompensationRequest } from "../../compensation-types.ts";
import type { NewTapeEntry, TapeEntry, TapeGapRead, TapeRead } from "../../fanout-types.ts";
import type {
  ClaimIdempotencyRequest,
  CompleteIdempotencyRequest,
  CompleteOutcome,
  IdempotencyClaim,
  IdempotencyRecord,
} from "../../idempotency-types.ts";
import type {
  DeclaredSchedule,
  ReconcileOptions,
  FireRequest,
  ScheduleError,
  ScheduleFire,
  ScheduleRecord,
  ScheduleSpec,
} from "../../schedule-types.ts";
import type { EngineSettleResult } from "../../memory/memory-queue.ts";
import type { LeaseRequest } from "../../memory/memory-journal.ts";
import type { TapeCut } from "../../memory/memory-tapes.ts";
import { SqliteBatch, type SqliteEngineOptions } from "./sqlite-batch.ts";
import { SqliteConsole } from "./sqlite-console.ts";
import { SqliteIdempotency } from "./sqlite-idempotency.ts";
import { SqliteJournal } from "./sqlite-journal.ts";
import { SqliteQueue } from "./sqlite-queue.ts";
import { SqliteSchedules } from "./sqlite-schedules.ts";
import { SqliteTapes } from "./sqlite-tapes.ts";

export { isIoFailure, type SqliteEngineOptions } from "./sqlite-batch.ts";

/**
 * The file driver's engine: every method of the MemoryEngine, synchronous,
 * over SQLite tables — one part per concern over one SqliteBatch (the turn's
 * transaction: one commit and one WAL fsync for all calls of a turn).
 * `pending()` is the commit of the batch a call just read or wrote; the store
 * awaits it before the call resolves, so nobody sees undurable state.
 */
export class SqliteEngine {
  private readonly batch: SqliteBatch;
  private readonly queue: SqliteQueue;
  private readonly journal: SqliteJournal;
  private readonly consoleViews: SqliteConsole;
  private readonly schedules: SqliteSchedules;
  private readonly idempotency: SqliteIdempotency;
  private readonly tapes: SqliteTapes;

  constructor(db: Database.Database, opts: SqliteEngineOptions) {
    this.batch = new SqliteBatch(db, opts);
    this.queue = new SqliteQueue(this.batch);
    this.journal = new SqliteJournal(this.batch, this.queue);
    this.consoleViews = new SqliteConsole(this.batch);
    this.schedules = new SqliteSchedules(this.batch, this.queue);
    this.idempotency = new SqliteIdempotency(this.batch);
    this.tapes = new SqliteTapes(this.batch);
  }

  /** Batches committed (one fsync each) since the engine was created. */
  get commits(): number {
    return this.batch.commits;
  }

  /** The failure that stopped the engine, if any. */
  get failed(): Error | null {
    return this.batch.failed;
  }

  /** The commit of the open batch, or null when nothing waits to commit. */
  pending(): Promise<void> | null {
    return this.batch.pending();
  }

  /** Commits the open batch now (close, tests). */
  flush(): void {
    this.batch.flush();
  }

  /**
   * Ends every lease in the store at once (expired at 0, before any clock's now): called once at open,
   * when the store's lock proves no other process uses it, so every lease in it is a gone process's
   * (killed, or a graceful stop's left to lapse). Its messages and runs are then claimable at once
   * instead of after up to a lease (30 s). Holders are kept, so a graceful stop's marks still count
   * (the same attempt, no recovery). Returns how many of each it ended.
   */
  endLeasesOfGoneProcesses(): { messages: number; runs: number } {
    this.batch.check();
    return this.batch.write(() => ({
      messages: this.batch.run(
        "UPDATE messages SET lease_expires_at = 0 WHERE status = 'inflight' AND lease_expires_at > 0",
      ),
      // A leased run's deadline is its lease; a sleeper's reservation only holds back its wake.
      runs:
        this.batch.run(
          `UPDATE runs SET lease_expires_at = 0, deadline = 0
             WHERE status IN ('running', 'compensating') AND lease_owner IS NOT NULL AND lease_expires_at > 0`,
        ) +
        this.batch.run(
          `UPDATE runs SET lease_expires_at = 0, deadline = wake_at
             WHERE status = 'sleeping' AND lease_owner IS NOT NULL AND lease_expires_at > 0 AND wake_at IS NOT NULL`,
        ),
    }));
  }

  // Queue

  checkEnqueue(messages: readonly NewMessage[]): void {
    return this.queue.checkEnqueue(messages);
  }

  enqueue(messages: readonly NewMessage[], now: number): void {
    return this.queue.enqueue(messages, now);
  }

  claim(req: ClaimRequest): ClaimedMessage[] {
    return this.queue.claim(req);
  }

  settle(settlements: readonly Settlement[], now: number): EngineSettleResult {
    return this.queue.settle(settlements, now);
  }

  releaseClaimed(claims: readonly ClaimRelease[], now: number): EngineSettleResult {
    return this.queue.releaseClaimed(claims, now);
  }

  leaveClaimsToLease(claims: readonly ClaimRelease[], now: number): string[] {
    return this.queue.leaveClaimsToLease(claims, now);
  }

  deadLetters(signal: string, limit?: number): StoredMessage[] {
    return this.queue.deadLetters(signal, limit);
  }

  getMessage(id: string): StoredMessage | undefined {
    return this.queue.getMessage(id);
  }

  replay(signal: string, ids: readonly string[] | "all", now: number): string[] {
    return this.queue.replay(signal, ids, now);
  }

  resettleDelivered(req: ResettleDelivered, now: number): { applied: boolean; signals: string[] } {
    return this.queue.resettleDelivered(req, now);
  }

  discard(signal: string, ids: readonly string[] | "all"): string[] {
    return this.queue.discard(signal, ids);
  }
  discardPending(signal: string, ids: readonly string[]): string[] {
    return this.queue.discardPending(signal, ids);
  }

  stats(signal: string, now: number): SignalStats {
    return this.queue.stats(signal, now);
  }

  nextLeaseExpiry(signal: string): number | null {
    return this.queue.nextLeaseExpiry(signal);
  }

  pruneDelivered(before: number, limit?: number): number {
    return this.queue.pruneDelivered(before, limit);
  }

  // Journal

  startRun(req: StartRun): AcquiredRun {
    return this.journal.startRun(req);
  }

  acquireRun(req: AcquireRequest): AcquiredRun {
    return this.journal.acquireRun(req);
  }

  renewLease(req: LeaseRequest): void {
    return this.journal.renewLease(req);
  }

  append(req: AppendRequest): void {
    return this.journal.append(req);
  }

  park(req: ParkRequest): void {
    return this.journal.park(req);
  }

  finish(req: FinishRequest): void {
    return this.journal.finish(req);
  }

  beginCompensation(req: BeginCompensationRequest): void {
    return this.journal.beginCompensation(req);
  }

  releaseRun(req: ReleaseRequest): boolean {
    return this.journal.releaseRun(req);
  }

  leaveToLease(req: LeaveToLeaseRequest): string[] {
    return this.journal.leaveToLease(req);
  }

  claimDueRuns(req: ClaimDueRunsRequest): AcquiredRun[] {
    return this.journal.claimDueRuns(req);
  }

  listOrphans(now: number, limit = Infinity, filter: RunFlowFilter = {}): RunRecord[] {
    return this.journal.listOrphans(now, limit, filter);
  }

  nextWakeAt(filter: RunFlowFilter = {}): number | null {
    return this.journal.nextWakeAt(filter);
  }

  wakeEarly(runId: string, now: number): boolean {
    return this.journal.wakeEarly(runId, now);
  }

  terminateRun(req: TerminateRequest): TerminateOutcome {
    return this.journal.terminateRun(req);
  }

  getRun(runId: string): RunRecord | undefined {
    return this.journal.getRun(runId);
  }

  getJournal(runId: string): JournalEntry[] {
    return this.journal.getJournal(runId);
  }

  getJournalEnds(runId: string, head: number, tail: number): JournalEnds {
    return this.journal.getJournalEnds(runId, head, tail);
  }

  listRuns(filter: { status?: RunStatus; flow?: string; limit?: number }): RunRecord[] {
    return this.journal.listRuns(filter);
  }

  prunableRuns(before: number, limit: number): string[] {
    return this.journal.prunableRuns(before, limit);
  }

  removeRuns(ids: readonly string[]): number {
    return this.journal.removeRuns(ids);
  }

  // Console

  pageMessages(req: MessagePageRequest): Page<StoredMessage> {
    return this.consoleViews.pageMessages(req);
  }

  pageRuns(req: RunPageRequest): Page<RunRecord> {
    return this.consoleViews.pageRuns(req);
  }

  runCounts(): Array<{ flow: string; status: RunStatus; count: number }> {
    return this.consoleViews.runCounts();
  }

  queueBacklog(): QueueBacklog[] {
    return this.consoleViews.queueBacklog();
  }

  throughput(from: number, bucketMs: number, now: number): Throughput[] {
    return this.consoleViews.throughput(from, bucketMs, now);
  }

  heartbeat(info: InstanceInfo, now: number): void {
    return this.consoleViews.heartbeat(info, now);
  }

  removeInstance(id: string): boolean {
    return this.consoleViews.removeInstance(id);
  }

  listInstances(since: number): InstanceRecord[] {
    return this.consoleViews.listInstances(since);
  }

  recordAudit(entry: AuditEntry): AuditRecord {
    return this.consoleViews.recordAudit(entry);
  }

  pageAudit(req: { cursor?: string | null; limit: number }): Page<AuditRecord> {
    return this.consoleViews.pageAudit(req);
  }

  // Schedules

  reconcileSchedules(
    declared: readonly DeclaredSchedule[],
    now: number,
    options?: ReconcileOptions,
  ): ScheduleRecord[] {
    return this.schedules.reconcileSchedules(declared, now, options);
  }

  listSchedules(): ScheduleRecord[] {
    return this.schedules.listSchedules();
  }

  getSchedule(name: string): ScheduleRecord | undefined {
    return this.schedules.getSchedule(name);
  }

  setSchedulePaused(name: string, paused: boolean, now: number): ScheduleRecord | undefined {
    return this.schedules.setSchedulePaused(name, paused, now);
  }

  overrideSchedule(name: string, spec: ScheduleSpec | null, now: number): ScheduleRecord | undefined {
    return this.schedules.overrideSchedule(name, spec, now);
  }

  fire(req: FireRequest): boolean {
    return this.schedules.fire(req);
  }

  recordScheduleError(name: string, error: ScheduleError | null, now: number): boolean {
    return this.schedules.recordScheduleError(name, error, now);
  }

  listFires(name: string, limit = 100): ScheduleFire[] {
    return this.schedules.listFires(name, limit);
  }

  pruneFires(before: number): number {
    return this.schedules.pruneFires(before);
  }

  // Idempotency

  claimIdempotency(req: ClaimIdempotencyRequest): { claim: IdempotencyClaim; changed: boolean } {
    return this.idempotency.claimIdempotency(req);
  }

  renewIdempotency(req: { key: string; fingerprint: string; now: number; lockMs: number }): boolean {
    return this.idempotency.renewIdempotency(req);
  }

  completeIdempotency(req: CompleteIdempotencyRequest): CompleteOutcome {
    return this.idempotency.completeIdempotency(req);
  }

  releaseIdempotency(req: { key: string; fingerprint: string }): boolean {
    return this.idempotency.releaseIdempotency(req);
  }

  getIdempotency(key: string): IdempotencyRecord | undefined {
    return this.idempotency.getIdempotency(key);
  }

  pruneIdempotency(before: number): number {
    return this.idempotency.pruneIdempotency(before);
  }

  // Tapes

  appendTape(entries: readonly NewTapeEntry[], now: number): TapeEntry[] {
    return this.tapes.appendTape(entries, now);
  }

  readTape(req: TapeRead): TapeEntry[] {
    return this.tapes.readTape(req);
  }

  tapeHead(signal: string, key: string): number {
    return this.tapes.tapeHead(signal, key);
  }

  tapeGap(req: TapeGapRead): number {
    return this.tapes.tapeGap(req);
  }

  lastTapePosition(): number {
    return this.tapes.lastTapePosition();
  }

  prunableTape(signal: string, before: number, limit: number): TapeCut[] {
    return this.tapes.prunableTape(signal, before, limit);
  }

  cutTape(signal: string, cuts: readonly TapeCut[]): number {
    return this.tapes.cutTape(signal, cuts);
  }
}
