/** MemoryEngine: the synchronous state machine behind the memory and file drivers. */
import type {
  AcquireRequest,
  LeaveToLeaseRequest,
  ReleaseRequest,
  AcquiredRun,
  AppendRequest,
  ClaimedMessage,
  ClaimRelease,
  ResettleDelivered,
  ClaimRequest,
  ClaimDueRunsRequest,
  FinishRequest,
  JournalEntry,
  JournalEnds,
  NewMessage,
  ParkRequest,
  RunFlowFilter,
  RunRecord,
  RunStatus,
  Settlement,
  SignalStats,
  StartRun,
  StoredMessage,
  TerminateOutcome,
  TerminateRequest,
} from "../types.ts";
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
} from "../console-types.ts";
import type { BeginCompensationRequest } from "../compensation-types.ts";
import * as consoleViews from "./memory-console.ts";
import { MemoryConsole, type ConsoleSnapshot } from "./memory-console.ts";
import { MemoryJournal, type LeaseRequest, type RunSnapshot } from "./memory-journal.ts";
import { MemoryQueue, type EngineSettleResult } from "./memory-queue.ts";
import { consumerRunId } from "../resettle-rules.ts";
import { MemorySchedules, type SchedulesSnapshot } from "./memory-schedules.ts";
import { MemoryIdempotency } from "./memory-idempotency.ts";
import { MemoryTapes, type TapeCut, type TapesSnapshot } from "./memory-tapes.ts";
import type { NewTapeEntry, TapeEntry, TapeGapRead, TapeRead } from "../fanout-types.ts";
import type {
  ClaimIdempotencyRequest,
  CompleteIdempotencyRequest,
  CompleteOutcome,
  IdempotencyClaim,
  IdempotencyRecord,
} from "../idempotency-types.ts";
import type {
  DeclaredSchedule,
  ReconcileOptions,
  FireRequest,
  ScheduleError,
  ScheduleFire,
  ScheduleRecord,
  ScheduleSpec,
} from "../schedule-types.ts";

/** The whole engine state as plain JSON data (file driver compaction, tests). */
export interface EngineSnapshot {
  version: 1;
  /** Next emit-order number the engine will assign. */
  nextSeq: number;
  /** Every stored message in emit order. */
  messages: (StoredMessage & { seq: number })[];
  runs: RunSnapshot[];
  /** Heartbeats and audit log (absent in snapshots written before the Console). */
  console?: ConsoleSnapshot;
  /** Absent in snapshots written before schedules existed. */
  schedules?: SchedulesSnapshot;
  /** Absent in snapshots written before Idempotency-Key support. */
  idempotency?: IdempotencyRecord[];
  /** Live tapes; absent in snapshots written before the file driver kept them. */
  tapes?: TapesSnapshot;
}

/**
 * One mutating call, as data. Engine methods are deterministic in their
 * arguments (time comes in as `now`, ids from the caller, emit order from the
 * engine's own counter), so a log of ops replayed through `applyOp` on a
 * restored snapshot reproduces the state exactly. Read-only calls are not ops.
 */
export type EngineOp =
  | { op: "enqueue"; messages: NewMessage[]; now: number }
  | { op: "claim"; req: ClaimRequest }
  | { op: "settle"; settlements: Settlement[]; now: number }
  | { op: "releaseClaimed"; claims: ClaimRelease[]; now: number }
  | { op: "leaveClaimsToLease"; claims: ClaimRelease[]; now: number }
  | { op: "replay"; signal: string; ids: readonly string[] | "all"; now: number }
  | { op: "resettleDelivered"; req: ResettleDelivered; now: number }
  | { op: "discard"; signal: string; ids: readonly string[] | "all" }
  | { op: "discardPending"; signal: string; ids: readonly string[] }
  | { op: "pruneDelivered"; before: number }
  | { op: "startRun"; req: StartRun }
  | { op: "acquireRun"; req: AcquireRequest }
  | { op: "renewLease"; req: LeaseRequest }
  | { op: "append"; req: AppendRequest }
  | { op: "park"; req: ParkRequest }
  | { op: "finish"; req: FinishRequest }
  | { op: "beginCompensation"; req: BeginCompensationRequest }
  | { op: "releaseRun"; req: ReleaseRequest }
  | { op: "leaveToLease"; req: LeaveToLeaseRequest }
  | { op: "claimDueRuns"; req: ClaimDueRunsRequest }
  | { op: "wakeEarly"; runId: string; now: number }
  | { op: "terminateRun"; req: TerminateRequest }
  | { op: "heartbeat"; info: InstanceInfo; now: number }
  | { op: "removeInstance"; id: string }
  | { op: "audit"; entry: AuditEntry }
  | { op: "reconcileSchedules"; declared: DeclaredSchedule[]; now: number; options?: ReconcileOptions }
  | { op: "setSchedulePaused"; name: string; paused: boolean; now: number }
  | { op: "overrideSchedule"; name: string; spec: ScheduleSpec | null; now: number }
  | { op: "fire"; req: FireRequest }
  | { op: "fireBatch"; reqs: FireRequest[] }
  | { op: "recordScheduleError"; name: string; error: ScheduleError | null; now: number }
  | { op: "pruneFires"; before: number }
  | { op: "pruneRuns"; ids: string[] }
  | { op: "claimIdempotency"; req: ClaimIdempotencyRequest }
  | { op: "renewIdempotency"; req: { key: string; fingerprint: string; now: number; lockMs: number } }
  | { op: "completeIdempotency"; req: CompleteIdempotencyRequest }
  | { op: "releaseIdempotency"; req: { key: string; fingerprint: string } }
  | { op: "pruneIdempotency"; before: number }
  | { op: "appendTape"; entries: TapeEntry[] }
  | { op: "pruneTape"; signal: string; cuts: TapeCut[] };

/**
 * The memory driver's engine: queue + journal on real data structures, fully
 * synchronous. The async Store (memory-store.ts) wraps it; the file driver
 * wraps the same engine and logs each op before its call resolves. Every
 * method either throws before changing anything or applies fully.
 */
export class MemoryEngine {
  private readonly queue = new MemoryQueue();
  private readonly journal = new MemoryJournal();
  private readonly consoleState = new MemoryConsole();
  private readonly schedules = new MemorySchedules();
  private readonly idempotency = new MemoryIdempotency();
  private readonly tapes = new MemoryTapes();

  static restore(snapshot: EngineSnapshot): MemoryEngine {
    if (snapshot.version !== 1)
      throw new Error(`memory engine: unknown snapshot version ${String(snapshot.version)}`);
    const engine = new MemoryEngine();
    engine.queue.load(snapshot);
    engine.journal.load(snapshot.runs);
    engine.consoleState.load(snapshot.console);
    engine.schedules.load(snapshot.schedules);
    engine.idempotency.load(snapshot.idempotency);
    engine.tapes.load(snapshot.tapes);
    return engine;
  }

  snapshot(): EngineSnapshot {
    const q = this.queue.snapshot();
    return {
      version: 1,
      nextSeq: q.nextSeq,
      messages: q.messages,
      runs: this.journal.snapshot(),
      console: this.consoleState.snapshot(),
      schedules: this.schedules.snapshot(),
      idempotency: this.idempotency.snapshot(),
      tapes: this.tapes.snapshot(),
    };
  }

  // Queue

  enqueue(messages: readonly NewMessage[], now: number): void {
    this.queue.enqueue(messages, now);
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
  pruneDelivered(before: number): number {
    // A durable consumer's message delivered at its run's park stays while the run is unfinished:
    // a failure after the wake settles it again (resettleDelivered).
    return this.queue.pruneDelivered(
      before,
      (m) => this.journal.isUnfinished(m.id) || this.journal.isUnfinished(consumerRunId(m)),
    );
  }

  // Journal

  startRun(req: StartRun): AcquiredRun {
    return this.journal.startRun(req);
  }
  acquireRun(req: AcquireRequest): AcquiredRun {
    return this.journal.acquireRun(req);
  }
  renewLease(req: LeaseRequest): void {
    this.journal.renewLease(req);
  }
  /** Entries and emits commit together: both are checked before either is written. */
  append(req: AppendRequest): void {
    // A retry of an append that committed (its reply was lost): nothing more is written.
    if (this.journal.alreadyAppended(req)) return;
    this.journal.checkAppend(req);
    if (req.emits !== undefined) this.queue.checkEnqueue(req.emits);
    this.journal.append(req);
    if (req.emits !== undefined) this.queue.enqueue(req.emits, req.now);
  }
  park(req: ParkRequest): void {
    this.journal.park(req);
  }
  finish(req: FinishRequest): void {
    this.journal.finish(req);
  }
  beginCompensation(req: BeginCompensationRequest): void {
    this.journal.beginCompensation(req);
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
  listOrphans(now: number, limit?: number, filter?: RunFlowFilter): RunRecord[] {
    return this.journal.listOrphans(now, limit, filter);
  }
  nextWakeAt(filter?: RunFlowFilter): number | null {
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

  // Console

  pageMessages(req: MessagePageRequest): Page<StoredMessage> {
    return consoleViews.pageMessages(this.queue.records(), req);
  }
  pageRuns(req: RunPageRequest): Page<RunRecord> {
    return consoleViews.pageRuns(this.journal.records(), req);
  }
  runCounts(): Array<{ flow: string; status: RunStatus; count: number }> {
    return consoleViews.runCounts(this.journal.records());
  }
  queueBacklog(): QueueBacklog[] {
    return this.queue.backlog();
  }
  throughput(from: number, bucketMs: number, now: number): Throughput[] {
    return consoleViews.throughput(this.queue.records(), from, bucketMs, now);
  }
  heartbeat(info: InstanceInfo, now: number): void {
    this.consoleState.heartbeat(info, now);
  }
  removeInstance(id: string): boolean {
    return this.consoleState.removeInstance(id);
  }
  listInstances(since: number): InstanceRecord[] {
    return this.consoleState.listInstances(since);
  }
  recordAudit(entry: AuditEntry): AuditRecord {
    return this.consoleState.recordAudit(entry);
  }
  pageAudit(req: { cursor?: string | null; limit: number }): Page<AuditRecord> {
    return this.consoleState.pageAudit(req);
  }

  // Schedules

  reconcileSchedules(
    declared: readonly DeclaredSchedule[],
    now: number,
    options?: ReconcileOptions,
  ): ScheduleRecord[] {
    return this.schedules.reconcile(declared, now, options);
  }
  listSchedules(): ScheduleRecord[] {
    return this.schedules.list();
  }
  getSchedule(name: string): ScheduleRecord | undefined {
    return this.schedules.get(name);
  }
  setSchedulePaused(name: string, paused: boolean, now: number): ScheduleRecord | undefined {
    return this.schedules.setPaused(name, paused, now);
  }
  overrideSchedule(name: string, spec: ScheduleSpec | null, now: number): ScheduleRecord | undefined {
    return this.schedules.override(name, spec, now);
  }
  /** The fired slot and its message commit together: both are checked before either is written. */
  fire(req: FireRequest): boolean {
    if (!this.schedules.canFire(req)) return false;
    this.queue.checkEnqueue([req.message]);
    this.schedules.recordFire(req);
    this.queue.enqueue([req.message], req.now);
    return true;
  }
  recordScheduleError(name: string, error: ScheduleError | null, now: number): boolean {
    return this.schedules.recordError(name, error, now);
  }
  listFires(name: string, limit?: number): ScheduleFire[] {
    return this.schedules.listFires(name, limit);
  }
  pruneFires(before: number): number {
    return this.schedules.prune(before);
  }

  // Retention: the ids are the op, so replaying a log removes exactly the runs the call did.
  prunableRuns(before: number, limit: number): string[] {
    return this.journal.prunable(before, limit);
  }
  removeRuns(ids: readonly string[]): number {
    return this.journal.remove(ids);
  }

  // Idempotency keys

  claimIdempotency(req: ClaimIdempotencyRequest): { claim: IdempotencyClaim; changed: boolean } {
    return this.idempotency.claim(req);
  }
  renewIdempotency(req: { key: string; fingerprint: string; now: number; lockMs: number }): boolean {
    return this.idempotency.renew(req);
  }
  completeIdempotency(req: CompleteIdempotencyRequest): CompleteOutcome {
    return this.idempotency.complete(req);
  }
  releaseIdempotency(req: { key: string; fingerprint: string }): boolean {
    return this.idempotency.release(req);
  }
  getIdempotency(key: string): IdempotencyRecord | undefined {
    return this.idempotency.get(key);
  }
  pruneIdempotency(before: number): number {
    return this.idempotency.prune(before);
  }

  // Live tapes: positions are given here and logged with the entries, so replay reproduces them.

  appendTape(entries: readonly NewTapeEntry[], now: number): TapeEntry[] {
    return this.tapes.append(entries, now);
  }
  putTapeEntries(entries: readonly TapeEntry[]): void {
    this.tapes.put(entries);
  }
  readTape(req: TapeRead): TapeEntry[] {
    return this.tapes.read(req);
  }
  tapeHead(signal: string, key: string): number {
    return this.tapes.head(signal, key);
  }
  tapeGap(req: TapeGapRead): number {
    return this.tapes.gap(req);
  }
  lastTapePosition(): number {
    return this.tapes.lastPosition();
  }
  prunableTape(signal: string, before: number, limit: number): TapeCut[] {
    return this.tapes.prunable(signal, before, limit).cuts;
  }
  cutTape(signal: string, cuts: readonly TapeCut[]): number {
    return this.tapes.cut(signal, cuts);
  }
}

/** Applies one logged op (file driver recovery). Returns what the method returned. */
export function applyOp(engine: MemoryEngine, op: EngineOp): unknown {
  switch (op.op) {
    case "enqueue":
      return engine.enqueue(op.messages, op.now);
    case "claim":
      return engine.claim(op.req);
    case "settle":
      return engine.settle(op.settlements, op.now);
    case "releaseClaimed":
      return engine.releaseClaimed(op.claims, op.now);
    case "leaveClaimsToLease":
      return engine.leaveClaimsToLease(op.claims, op.now);
    case "replay":
      return engine.replay(op.signal, op.ids, op.now);
    case "resettleDelivered":
      return engine.resettleDelivered(op.req, op.now);
    case "discard":
      return engine.discard(op.signal, op.ids);
    case "discardPending":
      return engine.discardPending(op.signal, op.ids);
    case "pruneDelivered":
      return engine.pruneDelivered(op.before);
    case "startRun":
      return engine.startRun(op.req);
    case "acquireRun":
      return engine.acquireRun(op.req);
    case "renewLease":
      return engine.renewLease(op.req);
    case "append":
      return engine.append(op.req);
    case "park":
      return engine.park(op.req);
    case "finish":
      return engine.finish(op.req);
    case "beginCompensation":
      return engine.beginCompensation(op.req);
    case "releaseRun":
      return engine.releaseRun(op.req);
    case "leaveToLease":
      return engine.leaveToLease(op.req);
    case "claimDueRuns":
      return engine.claimDueRuns(op.req);
    case "wakeEarly":
      return engine.wakeEarly(op.runId, op.now);
    case "terminateRun":
      return engine.terminateRun(op.req);
    case "heartbeat":
      return engine.heartbeat(op.info, op.now);
    case "removeInstance":
      return engine.removeInstance(op.id);
    case "audit":
      return engine.recordAudit(op.entry);
    case "reconcileSchedules":
      return engine.reconcileSchedules(op.declared, op.now, op.options);
    case "setSchedulePaused":
      return engine.setSchedulePaused(op.name, op.paused, op.now);
    case "overrideSchedule":
      return engine.overrideSchedule(op.name, op.spec, op.now);
    case "fire":
      return engine.fire(op.req);
    case "fireBatch":
      return op.reqs.map((r) => engine.fire(r));
    case "recordScheduleError":
      return engine.recordScheduleError(op.name, op.error, op.now);
    case "pruneFires":
      return engine.pruneFires(op.before);
    case "pruneRuns":
      return engine.removeRuns(op.ids);
    case "claimIdempotency":
      return engine.claimIdempotency(op.req);
    case "renewIdempotency":
      return engine.renewIdempotency(op.req);
    case "completeIdempotency": {
      // An op logged before completions carried runId and windowMs (the old file format): a
      // record it restores is born expired, as the old completion of an expired record left it.
      const logged: Partial<CompleteIdempotencyRequest> = op.req;
      return engine.completeIdempotency({
        ...op.req,
        runId: logged.runId ?? "",
        windowMs: logged.windowMs ?? 0,
      });
    }
    case "releaseIdempotency":
      return engine.releaseIdempotency(op.req);
    case "pruneIdempotency":
      return engine.pruneIdempotency(op.before);
    case "appendTape":
      return engine.putTapeEntries(op.entries);
    case "pruneTape":
      return engine.cutTape(op.signal, op.cuts);
  }
}
