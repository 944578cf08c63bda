/** Console queries on postgres: paged listings, throughput, heartbeats, audit log. */
/**
 * Console queries: keyset-paged listings, throughput, heartbeats, audit log.
 * Every listing seeks an index and reads at most `limit + 1` rows per branch
 * (never OFFSET), so a page costs the same on page 1 and page 10 000.
 * Measured (docs/console.md, "Scale"): with 1 000 000 messages and 100 000
 * runs in the store, one page of 50 takes a few ms.
 */
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
} from "../console-types.ts";
import { decodeAuditCursor, decodeCursor, decodeSeqCursor, encodeCursor } from "../console-cursor.ts";
import type { RunRecord, RunStatus, StoredMessage } from "../types.ts";
import { DB_NOW_MS, type PgContext, q } from "./postgres-context.ts";
import { migrations } from "./migrations/index.ts";
import { LIVE_INSTANCE_MS } from "./postgres-migrate.ts";
import { type MessageRow, type RunRow, toRunRecord, toStoredMessage } from "./postgres-rows.ts";

/** Every run status; a new status must be added here (the record makes the compiler say so). */
const STATUSES: Record<RunStatus, true> = {
  running: true,
  sleeping: true,
  compensating: true,
  completed: true,
  failed: true,
};

export async function pageMessages(ctx: PgContext, req: MessagePageRequest): Promise<Page<StoredMessage>> {
  const limit = Math.max(0, req.limit);
  const c = req.cursor ? decodeSeqCursor(req.cursor) : undefined;
  const t = `${ctx.s}.messages`;
  let sql: string;
  let params: unknown[];
  switch (req.status) {
    case "pending": {
      // Two partial indexes (unkeyed, keyed), each walked in seq order, merged.
      const after = c ? c[1] : 0;
      const branch = (keyed: boolean) =>
        `(SELECT * FROM ${t} WHERE signal = $1 AND status = 'pending' AND key IS ${keyed ? "NOT " : ""}NULL
          AND seq > $2 ORDER BY seq LIMIT $3)`;
      sql = `${branch(false)} UNION ALL ${branch(true)} ORDER BY seq LIMIT $3`;
      params = [req.signal, after, limit + 1];
      break;
    }
    case "inflight":
      sql = `SELECT * FROM ${t} WHERE signal = $1 AND status = 'inflight' AND seq > $2 ORDER BY seq LIMIT $3`;
      params = [req.signal, c ? c[1] : 0, limit + 1];
      break;
    case "dead":
      // messages_dead (signal, created_at, seq), walked forwards or (newest first) backwards.
      sql =
        req.newestFirst === true
          ? `SELECT * FROM ${t} WHERE signal = $1 AND status = 'dead' AND (created_at, seq) < ($2, $3)
             ORDER BY created_at DESC, seq DESC LIMIT $4`
          : `SELECT * FROM ${t} WHERE signal = $1 AND status = 'dead' AND (created_at, seq) > ($2, $3)
             ORDER BY created_at, seq LIMIT $4`;
      params =
        req.newestFirst === true
          ? [req.signal, c ? c[0] : Number.MAX_SAFE_INTEGER, c ? c[1] : 0, limit + 1]
          : [req.signal, c ? c[0] : -1, c ? c[1] : 0, limit + 1];
      break;
    case "delivered":
      sql = `SELECT * FROM ${t} WHERE signal = $1 AND status = 'delivered' AND (updated_at, seq) < ($2, $3)
             ORDER BY updated_at DESC, seq DESC LIMIT $4`;
      params = [req.signal, c ? c[0] : Number.MAX_SAFE_INTEGER, c ? c[1] : 0, limit + 1];
      break;
  }
  const { rows } = await q<MessageRow>(ctx.pool, sql, params);
  const page = rows.slice(0, limit);
  const last = page.at(-1);
  const key = (r: MessageRow): number =>
    req.status === "dead" ? r.created_at : req.status === "delivered" ? r.updated_at : 0;
  return {
    items: page.map(toStoredMessage),
    next: rows.length > limit && last ? encodeCursor(key(last), last.seq) : null,
  };
}

export async function pageRuns(ctx: PgContext, req: RunPageRequest): Promise<Page<RunRecord>> {
  const limit = Math.max(0, req.limit);
  const c = req.cursor ? decodeCursor(req.cursor) : undefined;
  const params: unknown[] = [limit + 1];
  const p = (v: unknown): string => `$${params.push(v)}`;
  const where: string[] = [];
  if (req.flow !== undefined) where.push(`flow = ${p(req.flow)}`);
  if (req.parentRunId !== undefined) where.push(`parent_run_id = ${p(req.parentRunId)}`);
  if (req.since !== undefined) where.push(`created_at >= ${p(req.since)}`);
  if (req.until !== undefined) where.push(`created_at < ${p(req.until)}`);
  // A sleeping run's current sleep is its last sleep entry: a backward walk of the journal's primary
  // key per sleeping run, newest run first, until the page is full.
  const status = req.sleepLabel !== undefined ? "sleeping" : req.status;
  if (req.sleepLabel !== undefined) {
    if (req.status !== undefined && req.status !== "sleeping") where.push("false");
    where.push(
      `(SELECT j.name FROM ${ctx.s}.journal_entries j WHERE j.run_id = runs.id AND j.kind = 'sleep'
        ORDER BY j.seq DESC LIMIT 1) = ${p(req.sleepLabel)}`,
    );
  }
  // RunRecord.held's rule (journal-rules shownHold): the leased statuses' seeks only, filtered.
  const leasedOnly = req.held === true;
  if (leasedOnly) {
    where.push("status IN ('running', 'compensating') AND lease_owner IS NULL AND held IS NOT NULL");
  }
  if (c) where.push(`(created_at, id COLLATE "C") < (${p(c[0])}, ${p(c[1])})`);
  const order = `ORDER BY created_at DESC, id COLLATE "C" DESC LIMIT $1`;
  const branch = (status: string | undefined): string =>
    `(SELECT * FROM ${ctx.s}.runs WHERE ${[...where, ...(status ? [`status = ${p(status)}`] : [])].join(" AND ") || "true"} ${order})`;
  // A parent's children come from runs_children; otherwise one seek of runs_page per status, merged.
  const sql =
    status !== undefined || req.parentRunId !== undefined
      ? branch(status)
      : `SELECT * FROM (${Object.keys(STATUSES)
          .filter((s) => !leasedOnly || s === "running" || s === "compensating")
          .map((s) => branch(s))
          .join(" UNION ALL ")}) u ${order}`;
  const { rows } = await q<RunRow>(ctx.pool, sql, params);
  const page = rows.slice(0, limit);
  const last = page.at(-1);
  return {
    items: page.map(toRunRecord),
    next: rows.length > limit && last ? encodeCursor(last.created_at, last.id) : null,
  };
}

export async function runCounts(
  ctx: PgContext,
): Promise<Array<{ flow: string; status: RunStatus; count: number }>> {
  const { rows } = await q<{ flow: string; status: RunStatus; count: number }>(
    ctx.pool,
    `SELECT flow, status, count(*)::int AS count FROM ${ctx.s}.runs GROUP BY flow, status ORDER BY flow COLLATE "C", status`,
    [],
  );
  return rows;
}

/**
 * Every queue's pending and inflight counts in one statement that reads only the partial indexes
 * of live messages — messages_ready_unkeyed / _keyed (signal, seq) for pending, messages_inflight
 * (signal, lease_expires_at) for inflight — as index-only scans grouped in index order; delivered
 * and dead rows are never visited. The oldest pending message is each ready index's head in emit
 * order (one row each), as `stats` reads it. No index of its own: the claim's indexes answer it.
 *
 * Measured (EXPLAIN ANALYZE, PostgreSQL 2-core dev box, after VACUUM ANALYZE): 200 000 delivered
 * + 1 000 pending (half keyed, 5 signals) + 50 inflight rows: Merge Full Join of three
 * GroupAggregates over Index Only Scans (messages_ready_unkeyed, messages_ready_keyed,
 * messages_inflight; Heap Fetches 0), plus two one-row index probes per signal — 45 buffers,
 * 0.23 ms execution, ~0.9 ms per call from node. The cost follows the backlog, not the history:
 * with 100 000 pending rows, the same plan takes ~45 ms.
 */
export async function queueBacklog(ctx: PgContext): Promise<QueueBacklog[]> {
  const m = `${ctx.s}.messages`;
  const { rows } = await q<{
    signal: string;
    pending: number;
    inflight: number;
    oldest: number | null;
    lease: number | null;
  }>(
    ctx.pool,
    `WITH ready AS (
       SELECT signal, count(*) AS n FROM ${m} WHERE status = 'pending' AND key IS NULL GROUP BY signal
       UNION ALL
       SELECT signal, count(*) AS n FROM ${m} WHERE status = 'pending' AND key IS NOT NULL GROUP BY signal
     ), pending AS (
       SELECT signal, sum(n)::int AS n FROM ready GROUP BY signal
     ), held AS (
       SELECT signal, count(*)::int AS n, min(lease_expires_at) AS lease FROM ${m}
       WHERE status = 'inflight' GROUP BY signal
     )
     SELECT COALESCE(p.signal, h.signal) AS signal, COALESCE(p.n, 0) AS pending, COALESCE(h.n, 0) AS inflight,
       LEAST(
         (SELECT created_at FROM ${m} WHERE signal = p.signal AND status = 'pending' AND key IS NULL ORDER BY seq LIMIT 1),
         (SELECT created_at FROM ${m} WHERE signal = p.signal AND status = 'pending' AND key IS NOT NULL ORDER BY seq LIMIT 1)
       ) AS oldest,
       h.lease
     FROM pending p FULL JOIN held h ON h.signal = p.signal`,
    [],
  );
  return rows
    .map((r) => ({
      signal: r.signal,
      pending: r.pending,
      inflight: r.inflight,
      oldestPendingCreatedAt: r.oldest === null ? null : Number(r.oldest),
      earliestLeaseExpiry: r.lease === null ? null : Number(r.lease),
    }))
    .sort((a, b) => (a.signal < b.signal ? -1 : a.signal > b.signal ? 1 : 0));
}

export async function throughput(
  ctx: PgContext,
  from: number,
  bucketMs: number,
  now: number,
): Promise<Throughput[]> {
  const n = Math.max(1, Math.ceil((now - from) / bucketMs));
  const { rows } = await q<{ signal: string; b: number; n: number }>(
    ctx.pool,
    `SELECT signal, ((updated_at - $1) / $2)::int AS b, count(*)::int AS n FROM ${ctx.s}.messages
     WHERE status = 'delivered' AND updated_at >= $1 AND updated_at < $3 GROUP BY 1, 2`,
    [from, bucketMs, from + n * bucketMs],
  );
  const out = new Map<string, Throughput>();
  for (const r of rows) {
    let t = out.get(r.signal);
    if (!t) {
      t = { signal: r.signal, from, bucketMs, delivered: new Array<number>(n).fill(0) };
      out.set(r.signal, t);
    }
    t.delivered[r.b] = r.n;
  }
  return [...out.values()].sort((a, b) => (a.signal < b.signal ? -1 : 1));
}

/**
 * The last migration this code knows: each heartbeat records it in the row's info (`storeMigration`,
 * the driver's own note: listInstances leaves it out), so a newer version's boot can tell which live
 * instances cannot run with its migrations (postgres-migrate.ts).
 */
const KNOWN_MIGRATION = migrations.at(-1)?.id ?? 0;

/** The schema's newest migration each store has logged the backstop's error for (once per migration, not each beat). */
const reportedNewer = new WeakMap<PgContext, number>();

/**
 * Writes the instance's row (the first beat overwrites the one its open recorded, `booting`, with the
 * full info) and, in the same statement, reads the migrations past what this code knows. One whose
 * `runs_with` is above it means the schema changed under this instance (a migration applied by hand,
 * or by a newer version that did not count it: an okengine from before open recorded its opener, or a
 * clock skewed past the live window): its statements may fail or do the wrong thing, so that is
 * logged as an error. Boot refuses such a schema (OKE1332); a running instance can only say so.
 */
export async function heartbeat(ctx: PgContext, info: InstanceInfo, now: number): Promise<void> {
  const { rows } = await q<{ latest: number | null; needs: number | null }>(
    ctx.pool,
    `WITH beat AS (
       INSERT INTO ${ctx.s}.instances (id, info, started_at, seen_at) VALUES ($1, $2, $3, $4)
       ON CONFLICT (id) DO UPDATE SET info = EXCLUDED.info, started_at = EXCLUDED.started_at, seen_at = EXCLUDED.seen_at
     )
     SELECT max(id) AS latest, max(coalesce(runs_with, id)) AS needs FROM ${ctx.s}.migrations WHERE id > $5`,
    [
      info.id,
      JSON.stringify({ ...info, storeMigration: KNOWN_MIGRATION }),
      info.startedAt,
      now,
      KNOWN_MIGRATION,
    ],
  );
  const { latest, needs } = rows[0] ?? { latest: null, needs: null };
  if (latest === null || needs === null || needs <= KNOWN_MIGRATION) return;
  if (reportedNewer.get(ctx) === latest) return;
  reportedNewer.set(ctx, latest);
  ctx.logger?.error(
    { schema: ctx.s, dbVersion: latest, codeVersion: KNOWN_MIGRATION, needs, instance: info.id },
    `okengine postgres: schema ${ctx.s} is at migration ${latest}, which leaves working only code that knows ` +
      `migration ${needs} or later, but this instance's code knows only ${KNOWN_MIGRATION}: it runs on a schema ` +
      "its code cannot run with. Stop it and run a newer okengine (a boot of this code refuses the schema, OKE1332).",
  );
}

/**
 * Keeps the row an open recorded (`booting`) live until the instance's first heartbeat replaces it:
 * a boot longer than the live window stays counted by a newer version's migrate(). No-op once it is
 * replaced or removed.
 */
export async function refreshBooting(ctx: PgContext, id: string): Promise<void> {
  await q(
    ctx.pool,
    `UPDATE ${ctx.s}.instances SET seen_at = ${DB_NOW_MS} WHERE id = $1 AND info ? 'booting'`,
    [id],
  );
}

/** How often refreshBooting runs: the heartbeat's period, well inside the live window. */
export const BOOTING_REFRESH_MS = LIVE_INSTANCE_MS / 3;

export async function listInstances(ctx: PgContext, since: number): Promise<InstanceRecord[]> {
  const { rows } = await q<{ info: InstanceInfo; seen_at: number }>(
    ctx.pool,
    // A row its open recorded (`booting`) is not an instance yet: the fleet counts it from its first heartbeat.
    `SELECT info, seen_at FROM ${ctx.s}.instances WHERE seen_at >= $1 AND NOT info ? 'booting'
     ORDER BY started_at, id COLLATE "C"`,
    [since],
  );
  // storeMigration is the driver's own note (see heartbeat), not part of what the app told.
  return rows.map(({ info, seen_at }) => {
    const { storeMigration: _, ...told } = info as InstanceInfo & { storeMigration?: number };
    return { ...told, seenAt: seen_at };
  });
}

export async function removeInstance(ctx: PgContext, id: string): Promise<void> {
  await q(ctx.pool, `DELETE FROM ${ctx.s}.instances WHERE id = $1`, [id]);
}

export async function recordAudit(ctx: PgContext, e: AuditEntry): Promise<AuditRecord> {
  const { rows } = await q<{ id: number }>(
    ctx.pool,
    `INSERT INTO ${ctx.s}.audit_log (at, actor, action, target, detail) VALUES ($1, $2, $3, $4, $5) RETURNING id`,
    [e.at, e.actor, e.action, e.target, JSON.stringify(e.detail)],
  );
  return { id: rows[0]!.id, ...e };
}

export async function pageAudit(
  ctx: PgContext,
  req: { cursor?: string | null; limit: number },
): Promise<Page<AuditRecord>> {
  const limit = Math.max(0, req.limit);
  const { rows } = await q<AuditRecord>(
    ctx.pool,
    `SELECT id, at, actor, action, target, detail FROM ${ctx.s}.audit_log
     WHERE ($1::bigint IS NULL OR id < $1) ORDER BY id DESC LIMIT $2`,
    [(req.cursor ? decodeAuditCursor(req.cursor) : undefined) ?? null, limit + 1],
  );
  const page = rows.slice(0, limit);
  return { items: page, next: rows.length > limit && page.length > 0 ? String(page.at(-1)!.id) : null };
}
