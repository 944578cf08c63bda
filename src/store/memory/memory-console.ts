/** The memory engine's Console half: paged listings over the engine's records, instance heartbeats, the audit log. */
import type {
  AuditEntry,
  AuditRecord,
  InstanceInfo,
  InstanceRecord,
  MessagePageRequest,
  Page,
  RunPageRequest,
  Throughput,
} from "../console-types.ts";
import type { RunRecord, RunStatus, StoredMessage } from "../types.ts";
import { decodeAuditCursor, decodeCursor, decodeSeqCursor, encodeCursor } from "../console-cursor.ts";
import { cloneJson } from "./clone-json.ts";
import { shownHold } from "../journal-rules.ts";
import { toRunRecord, toStoredMessage, type MsgRec, type RunRec } from "./memory-records.ts";

/** Plain-data state of this half, kept in the engine snapshot. */
export interface ConsoleSnapshot {
  instances: InstanceRecord[];
  audit: AuditRecord[];
}

/**
 * Sort key of a message listing: pending and inflight in emit order, dead by
 * creation (as deadLetters), delivered newest first. The memory driver scans
 * the signal's records per page (O(messages)); the SQL driver seeks an index.
 */
function messageKey(m: MsgRec, status: MessagePageRequest["status"]): [number, number] {
  if (status === "dead") return [m.createdAt, m.seq];
  if (status === "delivered") return [m.updatedAt, m.seq];
  return [0, m.seq];
}

const before = (a: [number, number], b: [number, number]): boolean =>
  a[0] < b[0] || (a[0] === b[0] && a[1] < b[1]);

export function pageMessages(records: Iterable<MsgRec>, req: MessagePageRequest): Page<StoredMessage> {
  const desc = req.status === "delivered" || (req.status === "dead" && req.newestFirst === true);
  const after = req.cursor ? decodeSeqCursor(req.cursor) : undefined;
  const hits: Array<{ k: [number, number]; m: MsgRec }> = [];
  for (const m of records) {
    if (m.signal !== req.signal || m.status !== req.status) continue;
    const k = messageKey(m, req.status);
    if (after && (desc ? !before(k, after) : !before(after, k))) continue;
    hits.push({ k, m });
  }
  hits.sort((x, y) => (before(x.k, y.k) ? -1 : before(y.k, x.k) ? 1 : 0) * (desc ? -1 : 1));
  const page = hits.slice(0, Math.max(0, req.limit));
  const last = page.at(-1);
  return {
    items: page.map((h) => toStoredMessage(h.m)),
    next: hits.length > page.length && last ? encodeCursor(last.k[0], last.k[1]) : null,
  };
}

/** The label of a run's last sleep entry (its current sleep while it sleeps). */
function currentSleep(r: RunRec): string | undefined {
  for (let i = r.entries.length - 1; i >= 0; i--) {
    const e = r.entries[i]!;
    if (e.kind === "sleep") return e.label;
  }
  return undefined;
}

const runBefore = (a: RunRec, t: number, id: string): boolean =>
  a.createdAt < t || (a.createdAt === t && a.id < id);

export function pageRuns(records: Iterable<RunRec>, req: RunPageRequest): Page<RunRecord> {
  const c = req.cursor ? decodeCursor(req.cursor) : undefined;
  const hits: RunRec[] = [];
  for (const r of records) {
    if (req.status !== undefined && r.status !== req.status) continue;
    if (req.flow !== undefined && r.flow !== req.flow) continue;
    if (req.parentRunId !== undefined && r.parentRunId !== req.parentRunId) continue;
    if (req.since !== undefined && r.createdAt < req.since) continue;
    if (req.until !== undefined && r.createdAt >= req.until) continue;
    if (req.sleepLabel !== undefined && (r.status !== "sleeping" || currentSleep(r) !== req.sleepLabel))
      continue;
    if (req.held === true && shownHold(r.status, r.leaseOwner, r.hold) === undefined) continue;
    if (c && !runBefore(r, c[0], c[1])) continue;
    hits.push(r);
  }
  hits.sort((a, b) => (runBefore(a, b.createdAt, b.id) ? 1 : runBefore(b, a.createdAt, a.id) ? -1 : 0));
  const page = hits.slice(0, Math.max(0, req.limit));
  const last = page.at(-1);
  return {
    items: page.map(toRunRecord),
    next: hits.length > page.length && last ? encodeCursor(last.createdAt, last.id) : null,
  };
}

export function runCounts(
  records: Iterable<RunRec>,
): Array<{ flow: string; status: RunStatus; count: number }> {
  const counts = new Map<string, { flow: string; status: RunStatus; count: number }>();
  for (const r of records) {
    const k = `${r.status} ${r.flow}`;
    const c = counts.get(k);
    if (c) c.count++;
    else counts.set(k, { flow: r.flow, status: r.status, count: 1 });
  }
  return [...counts.values()].sort((a, b) => (a.flow < b.flow ? -1 : a.flow > b.flow ? 1 : 0));
}

export function throughput(
  records: Iterable<MsgRec>,
  from: number,
  bucketMs: number,
  now: number,
): Throughput[] {
  const n = Math.max(1, Math.ceil((now - from) / bucketMs));
  const out = new Map<string, Throughput>();
  for (const m of records) {
    if (m.status !== "delivered" || m.updatedAt < from || m.updatedAt >= from + n * bucketMs) continue;
    let t = out.get(m.signal);
    if (!t) {
      t = { signal: m.signal, from, bucketMs, delivered: new Array<number>(n).fill(0) };
      out.set(m.signal, t);
    }
    t.delivered[Math.floor((m.updatedAt - from) / bucketMs)]!++;
  }
  return [...out.values()].sort((a, b) => (a.signal < b.signal ? -1 : 1));
}

/** Heartbeats and the audit log: tiny, so plain maps and arrays. */
export class MemoryConsole {
  private readonly instances = new Map<string, InstanceRecord>();
  private readonly audit: AuditRecord[] = [];

  heartbeat(info: InstanceInfo, now: number): void {
    this.instances.set(info.id, { ...cloneJson(info), seenAt: now });
  }
  removeInstance(id: string): boolean {
    return this.instances.delete(id);
  }
  listInstances(since: number): InstanceRecord[] {
    return [...this.instances.values()]
      .filter((i) => i.seenAt >= since)
      .sort((a, b) => a.startedAt - b.startedAt || (a.id < b.id ? -1 : 1))
      .map((i) => cloneJson(i));
  }
  recordAudit(entry: AuditEntry): AuditRecord {
    const rec: AuditRecord = { id: (this.audit.at(-1)?.id ?? 0) + 1, ...cloneJson(entry) };
    this.audit.push(rec);
    return cloneJson(rec);
  }
  pageAudit(req: { cursor?: string | null; limit: number }): Page<AuditRecord> {
    const beforeId = (req.cursor ? decodeAuditCursor(req.cursor) : undefined) ?? Infinity;
    const out: AuditRecord[] = [];
    let i = this.audit.length - 1;
    while (i >= 0 && this.audit[i]!.id >= beforeId) i--;
    for (; i >= 0 && out.length < req.limit; i--) out.push(cloneJson(this.audit[i]!));
    return { items: out, next: i >= 0 && out.length > 0 ? String(out.at(-1)!.id) : null };
  }
  snapshot(): ConsoleSnapshot {
    return { instances: [...this.instances.values()].map((i) => cloneJson(i)), audit: cloneJson(this.audit) };
  }
  load(s: Partial<ConsoleSnapshot> | undefined): void {
    for (const i of s?.instances ?? []) this.instances.set(i.id, cloneJson(i));
    for (const a of s?.audit ?? []) this.audit.push(cloneJson(a));
  }
}
