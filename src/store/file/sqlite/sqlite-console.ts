/** The file engine's Console reads and records: message and run pages, counts, throughput, instances, audit. */
import type { RunRecord, RunStatus, StoredMessage } from "../../types.ts";
import type {
  AuditEntry,
  AuditRecord,
  InstanceInfo,
  InstanceRecord,
  MessagePageRequest,
  Page,
  QueueBacklog,
  RunPageRequest,
  Throughput,
} from "../../console-types.ts";
import { decodeAuditCursor, decodeCursor, decodeSeqCursor, encodeCursor } from "../../console-cursor.ts";
import { toStored, toRun, type MsgRow, type RunRow } from "./sqlite-rows.ts";
import type { SqliteBatch } from "./sqlite-batch.ts";

export class SqliteConsole {
  constructor(private readonly b: SqliteBatch) {}

  pageMessages(req: MessagePageRequest): Page<StoredMessage> {
    this.b.check();
    const limit = Math.max(0, req.limit);
    const after = req.cursor ? decodeSeqCursor(req.cursor) : undefined;
    // dead pages by creation, delivered by delivery time (newest first), the rest by seq alone.
    const column =
      req.status === "dead" ? "created_at" : req.status === "delivered" ? "updated_at" : undefined;
    const keyOf = (m: MsgRow): [number, number] => [column === undefined ? 0 : m[column], m.seq];
    let rows: MsgRow[];
    if (column !== undefined) {
      const newest = req.status === "delivered" || req.newestFirst === true;
      const [cmp, dir, from] = newest ? ["<", " DESC", Number.MAX_VALUE] : [">", "", -Number.MAX_VALUE];
      rows = this.b.all<MsgRow>(
        `SELECT * FROM messages WHERE signal = ? AND status = '${req.status}'
           AND (${column} ${cmp} ? OR (${column} = ? AND seq ${cmp} ?)) ORDER BY ${column}${dir}, seq${dir} LIMIT ?`,
        req.signal,
        after?.[0] ?? from,
        after?.[0] ?? from,
        after?.[1] ?? from,
        limit + 1,
      );
    } else {
      // The cursor's first part is 0 for these; a later one would mean "past everything" (memory driver).
      const past = after !== undefined && after[0] > 0;
      rows = past
        ? []
        : this.b.all<MsgRow>(
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
    this.b.check();
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
    if (req.sleepLabel !== undefined)
      add(
        `status = 'sleeping' AND (SELECT j.name FROM journal_entries j WHERE j.run_id = runs.id AND j.kind = 'sleep'
           ORDER BY j.seq DESC LIMIT 1) = ?`,
        req.sleepLabel,
      );
    // RunRecord.held's rule (journal-rules shownHold) in SQL.
    if (req.held === true)
      add("status IN ('running', 'compensating') AND lease_owner IS NULL AND held IS NOT NULL");
    const c = req.cursor ? decodeCursor(req.cursor) : undefined;
    if (c) add("(created_at < ? OR (created_at = ? AND id < ?))", c[0], c[0], c[1]);
    const rows = this.b.all<RunRow>(
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
    this.b.check();
    return this.b.all<{ flow: string; status: RunStatus; count: number }>(
      "SELECT flow, status, count(*) AS count FROM runs GROUP BY flow, status ORDER BY flow, status",
    );
  }

  /**
   * Two grouped reads, each walking one partial index that covers it (messages_pending_age:
   * signal, created_at; messages_inflight: signal, lease_expires_at) — never a delivered or dead row.
   * EXPLAIN QUERY PLAN: "SCAN messages USING COVERING INDEX" for each; 0.06 ms + 0.01 ms with
   * 200 000 delivered, 1 000 pending and 50 inflight rows (better-sqlite3, after ANALYZE).
   */
  queueBacklog(): QueueBacklog[] {
    this.b.check();
    const out = new Map<string, QueueBacklog>();
    const row = (signal: string): QueueBacklog => {
      let r = out.get(signal);
      if (r === undefined) {
        r = { signal, pending: 0, inflight: 0, oldestPendingCreatedAt: null, earliestLeaseExpiry: null };
        out.set(signal, r);
      }
      return r;
    };
    for (const p of this.b.all<{ signal: string; n: number; t: number }>(
      "SELECT signal, count(*) AS n, min(created_at) AS t FROM messages WHERE status = 'pending' GROUP BY signal",
    )) {
      const r = row(p.signal);
      r.pending = p.n;
      r.oldestPendingCreatedAt = p.t;
    }
    for (const i of this.b.all<{ signal: string; n: number; t: number }>(
      `SELECT signal, count(*) AS n, min(lease_expires_at) AS t FROM messages WHERE status = 'inflight'
         GROUP BY signal`,
    )) {
      const r = row(i.signal);
      r.inflight = i.n;
      r.earliestLeaseExpiry = i.t;
    }
    return [...out.values()].sort((a, b) => (a.signal < b.signal ? -1 : a.signal > b.signal ? 1 : 0));
  }

  throughput(from: number, bucketMs: number, now: number): Throughput[] {
    this.b.check();
    const n = Math.max(1, Math.ceil((now - from) / bucketMs));
    const out = new Map<string, Throughput>();
    for (const m of this.b
      .stmt(
        `SELECT signal, updated_at FROM messages WHERE status = 'delivered' AND updated_at >= ? AND updated_at < ?`,
      )
      .iterate(from, from + n * bucketMs) as IterableIterator<{ signal: string; updated_at: number }>) {
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
    this.b.check();
    const rec: InstanceRecord = { ...(JSON.parse(JSON.stringify(info)) as InstanceInfo), seenAt: now };
    this.b.write(() =>
      this.b.run(
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
    this.b.check();
    if (this.b.get("SELECT 1 FROM instances WHERE id = ?", id) === undefined) return false;
    this.b.write(() => this.b.run("DELETE FROM instances WHERE id = ?", id));
    return true;
  }

  listInstances(since: number): InstanceRecord[] {
    this.b.check();
    return this.b
      .all<{ doc: string }>("SELECT doc FROM instances WHERE seen_at >= ? ORDER BY started_at, id", since)
      .map((r) => JSON.parse(r.doc) as InstanceRecord);
  }

  recordAudit(entry: AuditEntry): AuditRecord {
    this.b.check();
    return this.b.write(() => {
      const id = (this.b.get<{ m: number | null }>("SELECT max(id) AS m FROM audit")?.m ?? 0) + 1;
      const rec = { id, ...(JSON.parse(JSON.stringify(entry)) as AuditEntry) };
      this.b.run("INSERT INTO audit (id, doc) VALUES (?, ?)", id, JSON.stringify(rec));
      return rec;
    });
  }

  pageAudit(req: { cursor?: string | null; limit: number }): Page<AuditRecord> {
    this.b.check();
    const beforeId = (req.cursor ? decodeAuditCursor(req.cursor) : undefined) ?? Number.MAX_SAFE_INTEGER;
    const limit = Math.max(0, req.limit);
    const rows = this.b
      .all<{ doc: string }>(
        "SELECT doc FROM audit WHERE id < ? ORDER BY id DESC LIMIT ?",
        beforeId,
        limit + 1,
      )
      .map((r) => JSON.parse(r.doc) as AuditRecord);
    const items = rows.slice(0, limit);
    return { items, next: rows.length > items.length && items.length > 0 ? String(items.at(-1)!.id) : null };
  }
}
