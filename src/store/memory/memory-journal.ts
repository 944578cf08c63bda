/** The memory engine's journal: runs, leases, entries, sleepers and due runs. */
import { entryName } from "../types.ts";
import { sameEntryContent } from "../journal-same.ts";
import { storeErrors } from "../index.ts";
import type {
  ReleaseRequest,
  AcquireRequest,
  AcquiredRun,
  AppendRequest,
  ClaimDueRunsRequest,
  FinishRequest,
  JournalEntry,
  JournalEnds,
  LeaveToLeaseRequest,
  ParkRequest,
  RunFlowFilter,
  RunRecord,
  RunStatus,
  StartRun,
  TerminateOutcome,
  TerminateRequest,
} from "../types.ts";
import type { BeginCompensationRequest } from "../compensation-types.ts";
import { cloneJson } from "./clone-json.ts";
import { cloneEntry, toRunRecord, type RunRec } from "./memory-records.ts";
import { IndexedMinHeap } from "./min-heap.ts";
import {
  assertHolder,
  assertTakeable,
  compensateState,
  endsOf,
  finishState,
  runError,
  parkState,
  releaseState,
  holdOf,
  renewState,
  terminateState,
  wakeEarlyState,
  type KeptHold,
} from "../journal-rules.ts";
import {
  claimLease,
  dueForClaim,
  leaseLive,
  leaveState,
  passedByWalk,
  recoveredFrom,
  runDeadline,
  runState,
  sleepersHorizon,
  takeLease,
  type RunState,
} from "../wake-rules.ts";

export interface LeaseRequest {
  runId: string;
  owner: string;
  now: number;
  leaseMs: number;
}

/** A run as a snapshot keeps it: the record, its journal and the last release's kept note. */
export type RunSnapshot = RunRecord & { entries: JournalEntry[]; kept?: KeptHold | null };

/**
 * The journal half of the memory engine. Runs are indexed by status and flow;
 * sleeping runs sit in a wake heap, so due sleepers and the next wake-up are
 * found without a scan.
 *
 * Fencing: a write is accepted from the run's `leaseOwner` while it is
 * running. A holder whose lease expired may still write until another owner
 * takes the lease over — the same rule as a message settle.
 */
export class MemoryJournal {
  private readonly runs = new Map<string, RunRec>();
  private readonly byStatus: Record<RunStatus, Map<string, RunRec>> = {
    running: new Map(),
    sleeping: new Map(),
    compensating: new Map(),
    completed: new Map(),
    failed: new Map(),
  };
  private readonly byFlow = new Map<string, Map<string, RunRec>>();
  /**
   * Heaps of deadlines, one per flow: a sleeping run's `wakeAt`, a running
   * run's lease expiry. A heap's top is the next time a run of that flow may
   * need an owner, so the scheduler sets one timer; an expired running lease
   * is a dead instance's run, taken over lazily by the next claim (no
   * sweeper). Per flow, so a claimer filtered to its flows never walks past
   * others' due runs. Ties break by id so a restored snapshot claims in the
   * same order.
   */
  private readonly wakes = new Map<string, IndexedMinHeap<RunRec>>();

  private heapOf(flow: string): IndexedMinHeap<RunRec> {
    let heap = this.wakes.get(flow);
    if (heap === undefined) {
      heap = new IndexedMinHeap<RunRec>(earlier);
      this.wakes.set(flow, heap);
    }
    return heap;
  }

  /** Puts the run in its flow's deadline heap, moves it, or takes it out, after any change. */
  private reheap(r: RunRec): void {
    const heap = this.heapOf(r.flow);
    const inHeap = heap.has(r);
    if (Number.isFinite(deadline(r))) {
      if (inHeap) heap.update(r);
      else heap.push(r);
    } else if (inHeap) {
      heap.remove(r);
      if (heap.size === 0) this.wakes.delete(r.flow);
    }
  }

  /** The run with the earliest deadline among the heaps of `flows` (all flows when absent). */
  private earliest(flows: readonly string[] | undefined): RunRec | undefined {
    let best: RunRec | undefined;
    const consider = (heap: IndexedMinHeap<RunRec> | undefined): void => {
      const top = heap?.peek();
      if (top !== undefined && (best === undefined || earlier(top, best))) best = top;
    };
    if (flows === undefined) for (const heap of this.wakes.values()) consider(heap);
    else for (const flow of new Set(flows)) consider(this.wakes.get(flow));
    return best;
  }

  startRun(req: StartRun): AcquiredRun {
    const existing = this.runs.get(req.id);
    if (existing !== undefined) return this.take(existing, req.owner, req.now, req.leaseMs);
    const r: RunRec = {
      heapIndex: -1,
      id: req.id,
      flow: req.flow,
      status: "running",
      input: cloneJson(req.input),
      output: undefined,
      error: undefined,
      parentRunId: req.parentRunId,
      leaseOwner: req.owner,
      leaseExpiresAt: req.now + req.leaseMs,
      wakeAt: null,
      recoveries: 0,
      createdAt: req.now,
      updatedAt: req.now,
      entries: [],
    };
    this.index(r);
    this.reheap(r);
    return { run: toRunRecord(r), entries: [], created: true };
  }

  acquireRun(req: AcquireRequest): AcquiredRun {
    const r = this.mustGet(req.runId);
    assertTakeable(r, req);
    return this.take(r, req.owner, req.now, req.leaseMs);
  }

  renewLease(req: LeaseRequest): void {
    const r = this.holder(req.runId, req.owner);
    this.apply(r, renewState(r, req));
  }

  /**
   * True when this append was committed already: the holder sends entries
   * that each sit at their seq with the same kind, name and content (a retry
   * after the first reply was lost). Such an append writes nothing, its emits
   * included. Same positions, kinds and names with another content is no
   * retry: refused with OKE1313. Throws like append when the caller does not
   * hold the lease.
   */
  alreadyAppended(req: Pick<AppendRequest, "runId" | "owner" | "entries">): boolean {
    const r = this.holder(req.runId, req.owner);
    if (req.entries.length === 0) return false;
    const batch = new Set<number>();
    let differs: JournalEntry | undefined;
    for (const e of req.entries) {
      if (batch.has(e.seq)) return false;
      batch.add(e.seq);
      const at = r.entries[lowerBound(r.entries, e.seq)];
      if (at?.seq !== e.seq || at.kind !== e.kind || entryName(at) !== entryName(e)) return false;
      if (differs === undefined && !sameEntryContent(at, e)) differs = e;
    }
    if (differs !== undefined)
      throw storeErrors.entryDiffers(r.id, differs.seq, differs.kind, entryName(differs));
    return true;
  }

  /** Throws if the append would be refused; changes nothing. */
  checkAppend(req: Pick<AppendRequest, "runId" | "owner" | "entries">): void {
    this.checkSeqs(this.holder(req.runId, req.owner), req.entries);
  }

  append(req: AppendRequest): void {
    this.checkAppend(req);
    const r = this.runs.get(req.runId)!;
    this.insertEntries(r, req.entries);
    if (req.leaseMs !== undefined) r.leaseExpiresAt = req.now + req.leaseMs;
    r.updatedAt = req.now;
    this.reheap(r);
  }

  park(req: ParkRequest): void {
    const r = this.holder(req.runId, req.owner);
    this.checkSeqs(r, [req.entry]);
    this.insertEntries(r, [req.entry]);
    this.apply(r, parkState(r, req));
  }

  finish(req: FinishRequest): void {
    const r = this.holder(req.runId, req.owner);
    const { state, error } = finishState(r, req);
    r.output = cloneJson(req.output);
    r.error = cloneJson(error);
    this.apply(r, state);
  }

  /** running → compensating, fenced like a write; the failure becomes the run's error. */
  beginCompensation(req: BeginCompensationRequest): void {
    const r = this.holder(req.runId, req.owner);
    const { state, error } = compensateState(r, req);
    r.error = cloneJson(error);
    this.apply(r, state);
  }

  /** Releases the lease if `owner` holds it; a non-holder changes nothing. Returns whether it did. */
  releaseRun(req: ReleaseRequest): boolean {
    const r = this.runs.get(req.runId);
    if (r === undefined || r.leaseOwner !== req.owner) return false;
    this.apply(r, releaseState(r, req));
    r.hold = holdOf(req, r.hold, r.entries.length);
    return true;
  }

  /** A graceful stop leaves these runs to their leases (wake-rules leaveState): the ids left so. */
  leaveToLease(req: LeaveToLeaseRequest): string[] {
    const out: string[] = [];
    for (const { runId, owner } of req.runs) {
      const r = this.runs.get(runId);
      if (r === undefined) continue;
      const { state, left } = leaveState(r, owner, req.now);
      if (state !== null) this.apply(r, state);
      if (left) out.push(runId);
    }
    return out;
  }

  claimDueRuns(req: ClaimDueRunsRequest): AcquiredRun[] {
    if (req.runIds !== undefined) return this.claimDueByIds(req, req.runIds);
    const out: AcquiredRun[] = [];
    const dueBy = sleepersHorizon(req.now, req.sleepersDueBy);
    // Live leases that lapse before dueBy: out of the heap while the walk passes them, then back.
    const passed: RunRec[] = [];
    for (
      let r = this.earliest(req.flows);
      r !== undefined && out.length < req.max;
      r = this.earliest(req.flows)
    ) {
      const at = deadline(r);
      if (at > dueBy) break;
      if (passedByWalk(r, at, req.now)) {
        this.heapOf(r.flow).remove(r);
        passed.push(r);
        continue;
      }
      out.push({ ...this.claim(r, req.owner, req.now, req.leaseMs), dueAt: at });
    }
    for (const r of passed) this.reheap(r);
    return out;
  }

  /** claimDueRuns among `ids`: the same eligibility and order as the heap walk, looked up by id. */
  private claimDueByIds(req: ClaimDueRunsRequest, ids: readonly string[]): AcquiredRun[] {
    const flows = req.flows === undefined ? undefined : new Set(req.flows);
    const horizon = sleepersHorizon(req.now, req.sleepersDueBy);
    const due: Array<{ r: RunRec; dueAt: number }> = [];
    for (const id of new Set(ids)) {
      const r = this.runs.get(id);
      const dueAt = r === undefined ? null : dueForClaim(r, req.owner, req.now, horizon);
      if (r === undefined || dueAt === null) continue;
      if (flows === undefined || flows.has(r.flow)) due.push({ r, dueAt });
    }
    due.sort((a, b) => (earlier(a.r, b.r) ? -1 : 1));
    return due
      .slice(0, Math.max(0, req.max))
      .map(({ r, dueAt }) => ({ ...this.claim(r, req.owner, req.now, req.leaseMs), dueAt }));
  }

  listOrphans(now: number, limit = Infinity, filter: RunFlowFilter = {}): RunRecord[] {
    const out: RunRecord[] = [];
    const flows = filter.flows === undefined ? undefined : new Set(filter.flows);
    const mine = (r: RunRec): boolean => flows === undefined || flows.has(r.flow);
    for (const status of ["running", "compensating"] as const) {
      for (const r of this.byStatus[status].values()) {
        if (out.length >= limit) return out;
        if (!leaseLive(r, now) && mine(r)) out.push(toRunRecord(r));
      }
    }
    // A sleeping run never holds a lease: whoever scans must schedule it.
    for (const r of this.byStatus.sleeping.values()) {
      if (out.length >= limit) return out;
      if (mine(r)) out.push(toRunRecord(r));
    }
    return out;
  }

  nextWakeAt(filter: RunFlowFilter = {}): number | null {
    const top = this.earliest(filter.flows);
    return top === undefined ? null : deadline(top);
  }

  wakeEarly(runId: string, now: number): boolean {
    const r = this.runs.get(runId);
    const state = r === undefined ? null : wakeEarlyState(r, now);
    if (r === undefined || state === null) return false;
    this.apply(r, state);
    return true;
  }

  /** An operator ends the run for good unless someone holds it (journal-rules terminateState). */
  terminateRun(req: TerminateRequest): TerminateOutcome {
    const r = this.runs.get(req.runId);
    if (r === undefined) return { outcome: "missing" };
    const d = terminateState(r, req.now);
    if ("refused" in d) return d.refused;
    r.error = { code: req.error.code, message: req.error.message };
    this.apply(r, d.state);
    return { outcome: "terminated", run: toRunRecord(r) };
  }

  /** True when run `runId` exists and has not ended (pruneDelivered keeps its consumer's message). */
  isUnfinished(runId: string): boolean {
    const status = this.runs.get(runId)?.status;
    return status !== undefined && status !== "completed" && status !== "failed";
  }

  getRun(runId: string): RunRecord | undefined {
    const r = this.runs.get(runId);
    return r === undefined ? undefined : toRunRecord(r);
  }

  getJournal(runId: string): JournalEntry[] {
    return this.runs.get(runId)?.entries.map((e) => cloneEntry(e, runId)) ?? [];
  }

  /** Only the ends are cloned: a long journal's middle costs nothing. */
  getJournalEnds(runId: string, head: number, tail: number): JournalEnds {
    const ends = endsOf(this.runs.get(runId)?.entries ?? [], head, tail);
    return {
      head: ends.head.map((e) => cloneEntry(e, runId)),
      tail: ends.tail.map((e) => cloneEntry(e, runId)),
      count: ends.count,
    };
  }

  /** Matching runs, oldest first (createdAt, then id). */
  listRuns(filter: { status?: RunStatus; flow?: string; limit?: number }): RunRecord[] {
    const byFlow =
      filter.flow === undefined ? undefined : (this.byFlow.get(filter.flow) ?? new Map<string, RunRec>());
    const byStatus = filter.status === undefined ? undefined : this.byStatus[filter.status];
    const source =
      byFlow !== undefined && (byStatus === undefined || byFlow.size <= byStatus.size)
        ? byFlow
        : (byStatus ?? this.runs);
    const matches: RunRec[] = [];
    for (const r of source.values()) {
      if (
        (filter.status === undefined || r.status === filter.status) &&
        (filter.flow === undefined || r.flow === filter.flow)
      ) {
        matches.push(r);
      }
    }
    matches.sort((a, b) => a.createdAt - b.createdAt || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    return (filter.limit === undefined ? matches : matches.slice(0, Math.max(0, filter.limit))).map(
      toRunRecord,
    );
  }

  /**
   * Ids of at most `limit` finished runs last updated before `before`, oldest
   * finish first as far as the status maps keep finish order (a run enters
   * its terminal map when it finishes).
   */
  prunable(before: number, limit: number): string[] {
    const out: string[] = [];
    for (const status of ["completed", "failed"] as const)
      for (const r of this.byStatus[status].values()) {
        if (out.length >= limit) return out;
        if (r.updatedAt < before) out.push(r.id);
      }
    return out;
  }

  /** Deletes finished runs and their journals (retention); live ids are skipped. */
  remove(ids: readonly string[]): number {
    let n = 0;
    for (const id of ids) {
      const r = this.runs.get(id);
      if (r === undefined || (r.status !== "completed" && r.status !== "failed")) continue;
      this.runs.delete(id);
      this.byStatus[r.status].delete(id);
      const flow = this.byFlow.get(r.flow);
      flow?.delete(id);
      if (flow?.size === 0) this.byFlow.delete(r.flow);
      const heap = this.wakes.get(r.flow);
      if (heap?.remove(r) === true && heap.size === 0) this.wakes.delete(r.flow);
      n++;
    }
    return n;
  }

  /** Every run record (Console listings read, never mutate). */
  records(): Iterable<RunRec> {
    return this.runs.values();
  }

  snapshot(): RunSnapshot[] {
    const out: RunSnapshot[] = [];
    for (const r of this.runs.values())
      out.push({
        ...toRunRecord(r),
        entries: r.entries.map((e) => cloneEntry(e, r.id)),
        kept: r.hold == null ? null : { ...r.hold },
      });
    return out;
  }

  /** Rebuilds the indexes from a snapshot; call on a fresh journal. */
  load(runs: readonly RunSnapshot[]): void {
    for (const s of runs) {
      const r: RunRec = {
        heapIndex: -1,
        id: s.id,
        flow: s.flow,
        status: s.status,
        input: cloneJson(s.input),
        output: cloneJson(s.output),
        error: s.error === undefined ? undefined : cloneJson(runError(s.error)),
        parentRunId: s.parentRunId,
        leaseOwner: s.leaseOwner,
        leaseExpiresAt: s.leaseExpiresAt,
        wakeAt: s.wakeAt,
        // Snapshots written before runs counted recoveries have none.
        recoveries: s.recoveries ?? 0,
        createdAt: s.createdAt,
        updatedAt: s.updatedAt,
        // A snapshot from before `kept` has only the shown note: shown only while no one took the run
        // since its release, so its journal is as it was then.
        hold:
          s.kept !== undefined
            ? s.kept && { ...s.kept }
            : s.held === undefined
              ? null
              : { ...s.held, at: s.entries.length },
        entries: s.entries.map((e) => cloneEntry(e, s.id)).sort((a, b) => a.seq - b.seq),
      };
      this.index(r);
      this.reheap(r);
    }
  }

  /** claimDueRuns' take: reserves a sleeper claimed ahead of its wake, takes anything else (claimLease). */
  private claim(r: RunRec, owner: string, now: number, leaseMs: number): AcquiredRun {
    return this.taken(r, claimLease(r, owner, now, leaseMs));
  }

  /** Takes the run's lease for `owner`: refused for terminal runs and live leases of others (takeLease). */
  private take(r: RunRec, owner: string, now: number, leaseMs: number): AcquiredRun {
    return this.taken(r, takeLease(r, owner, now, leaseMs));
  }

  /** Writes the state a take decided; the run as taken, with whom it was recovered from if it was. */
  private taken(r: RunRec, s: RunState): AcquiredRun {
    const from = recoveredFrom(runState(r), s);
    this.apply(r, s);
    return {
      run: toRunRecord(r),
      entries: r.entries.map((e) => cloneEntry(e, r.id)),
      created: false,
      ...(from === undefined ? {} : { recoveredFrom: from }),
    };
  }

  /** Writes a state a rule decided, and moves the run in its indexes. */
  private apply(r: RunRec, s: RunState): void {
    this.setStatus(r, s.status);
    r.leaseOwner = s.leaseOwner;
    r.leaseExpiresAt = s.leaseExpiresAt;
    r.wakeAt = s.wakeAt;
    r.recoveries = s.recoveries;
    r.updatedAt = s.updatedAt;
    this.reheap(r);
  }

  private holder(runId: string, owner: string): RunRec {
    const r = this.mustGet(runId);
    assertHolder(r, owner);
    return r;
  }

  private mustGet(runId: string): RunRec {
    const r = this.runs.get(runId);
    if (r === undefined) throw storeErrors.runNotFound(runId);
    return r;
  }

  private checkSeqs(r: RunRec, entries: readonly JournalEntry[]): void {
    const batch = new Set<number>();
    for (const e of entries) {
      if (batch.has(e.seq) || hasSeq(r.entries, e.seq)) throw storeErrors.duplicateSeq(r.id, e.seq);
      batch.add(e.seq);
    }
  }

  private insertEntries(r: RunRec, entries: readonly JournalEntry[]): void {
    for (const e of entries) {
      const copy = cloneEntry(e, r.id);
      const last = r.entries.at(-1);
      if (last === undefined || last.seq < copy.seq) r.entries.push(copy);
      else r.entries.splice(lowerBound(r.entries, copy.seq), 0, copy);
    }
  }

  private index(r: RunRec): void {
    this.runs.set(r.id, r);
    this.byStatus[r.status].set(r.id, r);
    let flow = this.byFlow.get(r.flow);
    if (flow === undefined) {
      flow = new Map();
      this.byFlow.set(r.flow, flow);
    }
    flow.set(r.id, r);
  }

  private setStatus(r: RunRec, status: RunStatus): void {
    if (r.status === status) return;
    this.byStatus[r.status].delete(r.id);
    this.byStatus[status].set(r.id, r);
    r.status = status;
  }
}

/** When the run next needs an owner (wake-rules runDeadline); Infinity = never, for the heap. */
const deadline = (r: RunRec): number => runDeadline(r) ?? Infinity;

/** Deadline order, ties by id. */
const earlier = (a: RunRec, b: RunRec): boolean =>
  deadline(a) < deadline(b) || (deadline(a) === deadline(b) && a.id < b.id);

function lowerBound(entries: readonly JournalEntry[], seq: number): number {
  let lo = 0;
  let hi = entries.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (entries[mid]!.seq < seq) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

const hasSeq = (entries: readonly JournalEntry[], seq: number): boolean =>
  entries[lowerBound(entries, seq)]?.seq === seq;
