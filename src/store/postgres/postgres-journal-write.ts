/** Journal writes on postgres, each one fenced statement. */
import { runError } from "../journal-rules.ts";
import { entryName, type AppendRequest, type FinishRequest, type ParkRequest } from "../types.ts";
import { type PgContext, preparedName, q, unique, wakePayload } from "./postgres-context.ts";
import { enqueuedEvents, insertMessagesParams, insertMessagesSql } from "./postgres-enqueue.ts";
import { entriesParam, insertEntriesSql, jsonParam } from "./postgres-rows.ts";
import { refusal } from "./postgres-runs.ts";
import { mapConflict } from "./postgres-errors.ts";
import { storeErrors } from "../index.ts";

/**
 * Journal writes, each ONE statement (so one implicit transaction and one
 * round trip): a fencing UPDATE of the run row — accepted only from the lease
 * owner of a running run, like the memory driver — and, only if it matched,
 * the INSERT of the entry rows (one per (run_id, seq), never the whole
 * journal) and, for append, of the emitted messages plus their NOTIFY: the
 * outbox commits with the journal or not at all.
 */

// running or compensating: both are leased runs (see compensation-types.ts).
const fence = `id = $1 AND status IN ('running', 'compensating') AND lease_owner = $2`;
const fencedIn = "EXISTS (SELECT 1 FROM run)";

/**
 * A lone append without emits (every step of S9) calls migration 0017's
 * journal_append: its UPDATE and INSERT are planned once per connection, on
 * the runs primary key whatever the statistics (see the migration), and the
 * call itself is prepared (a function call has no plan to choose). Measured
 * with bench/s9-stmt.ts on a private cluster, one connection, 400 runs a
 * round: PostgreSQL CPU per 3-step run 3.4–3.8 ms with the CTE below sent
 * unprepared (planning 274 µs + execution 178 µs per append in
 * pg_stat_statements), 0.8–1.5 ms with the function. An append that emits
 * keeps the CTE: it carries the outbox's messages and NOTIFY.
 */
const appendFnSql = (s: string): string =>
  `SELECT ${s}.journal_append($1::text, $2::text, $3::bigint, $4::bigint, $5::json) AS ok`;

export async function append(ctx: PgContext, req: AppendRequest): Promise<void> {
  const emits = req.emits ?? [];
  if (emits.length === 0) return appendAlone(ctx, req);
  const payload = emits.length === 0 ? null : wakePayload(ctx, { e: unique(emits.map((m) => m.signal)) });
  const sql = `
    WITH run AS (
      UPDATE ${ctx.s}.runs
      SET stepped_at = $3, lease_expires_at = CASE WHEN $4::bigint IS NULL THEN lease_expires_at ELSE $3::bigint + $4::bigint END
      WHERE ${fence}
      RETURNING id),
    entries AS (${insertEntriesSql(ctx.s, "$5", fencedIn)} RETURNING 1),
    emits AS (${insertMessagesSql(ctx.s, 6, fencedIn)} RETURNING 1),
    n AS (SELECT pg_notify($12, $13) FROM run WHERE $13::text IS NOT NULL)
    SELECT (SELECT count(*) FROM run)::int AS fenced_in, (SELECT count(*) FROM n) AS notified`;
  let ok: boolean;
  try {
    const { rows } = await q<{ fenced_in: number }>(ctx.pool, sql, [
      req.runId,
      req.owner,
      req.now,
      req.leaseMs ?? null,
      entriesParam(req.runId, req.entries),
      ...insertMessagesParams(emits, req.now),
      ctx.channel,
      payload,
    ]);
    ok = rows[0]?.fenced_in === 1;
  } catch (err) {
    // A retry of an append that committed (its reply was lost) collides with its own rows: nothing more is written.
    if ((err as { code?: unknown }).code === "23505" && (await alreadyAppended(ctx, req))) return;
    throw mapConflict(err, req.runId);
  }
  if (!ok) throw await refusal(ctx, req.runId, true);
  ctx.emit(enqueuedEvents(emits));
}

async function appendAlone(ctx: PgContext, req: AppendRequest): Promise<void> {
  const sql = appendFnSql(ctx.s);
  let ok: boolean;
  try {
    const { rows } = await q<{ ok: boolean }>(
      ctx.pool,
      sql,
      [req.runId, req.owner, req.now, req.leaseMs ?? null, entriesParam(req.runId, req.entries)],
      preparedName("append1", sql),
    );
    ok = rows[0]?.ok === true;
  } catch (err) {
    if ((err as { code?: unknown }).code === "23505" && (await alreadyAppended(ctx, req))) return;
    throw mapConflict(err, req.runId);
  }
  if (!ok) throw await refusal(ctx, req.runId, true);
}

/**
 * True when the holder's append is journaled already: every entry sits at its
 * seq with the same kind, name and content, and `owner` still holds the run.
 * Its emits committed in the same statement as those entries. The same
 * positions, kinds and names with another content is no retry: OKE1313.
 * Content is compared in SQL (as jsonb, whose equality ignores key order, as
 * journal-same.ts does for the other drivers).
 */
async function alreadyAppended(ctx: PgContext, req: AppendRequest): Promise<boolean> {
  const seqs = req.entries.map((e) => e.seq);
  if (seqs.length === 0 || new Set(seqs).size !== seqs.length) return false;
  const { rows } = await q<{ seq: number; kind: string; name: string; held: boolean; same: boolean }>(
    ctx.pool,
    `SELECT e.seq, e.kind, e.name, EXISTS (SELECT 1 FROM ${ctx.s}.runs WHERE ${fence}) AS held,
       (e.value::jsonb IS NOT DISTINCT FROM (s.value -> 'v')::jsonb AND e.error IS NOT DISTINCT FROM s.error
        AND e.duration IS NOT DISTINCT FROM s.duration AND e.wake_at IS NOT DISTINCT FROM s.wake_at) AS same
     FROM ${ctx.s}.journal_entries e
     JOIN json_to_recordset($3::json)
       AS s(seq integer, value json, error jsonb, duration text, wake_at bigint) ON s.seq = e.seq
     WHERE e.run_id = $1`,
    [req.runId, req.owner, entriesParam(req.runId, req.entries)],
  );
  if (rows.length !== seqs.length || !rows.every((r) => r.held)) return false;
  const stored = new Map(rows.map((r) => [r.seq, r]));
  if (
    !req.entries.every((e) => stored.get(e.seq)?.kind === e.kind && stored.get(e.seq)?.name === entryName(e))
  )
    return false;
  const differs = req.entries.find((e) => stored.get(e.seq)?.same !== true);
  if (differs !== undefined)
    throw storeErrors.entryDiffers(req.runId, differs.seq, differs.kind, entryName(differs));
  return true;
}

/** Appends the sleep entry, sets `sleeping` + `wakeAt`, releases the lease; wakes schedulers. */
export async function park(ctx: PgContext, req: ParkRequest): Promise<void> {
  const sql = `
    WITH run AS (
      UPDATE ${ctx.s}.runs
      SET status = 'sleeping', wake_at = $4, lease_owner = NULL, lease_expires_at = NULL, updated_at = $3
      WHERE ${fence}
      RETURNING id),
    entries AS (${insertEntriesSql(ctx.s, "$5", fencedIn)} RETURNING 1),
    n AS (SELECT pg_notify($6, $7) FROM run WHERE $7::text IS NOT NULL)
    SELECT (SELECT count(*) FROM run)::int AS fenced_in, (SELECT count(*) FROM entries) AS written, (SELECT count(*) FROM n) AS notified`;
  let ok: boolean;
  try {
    const { rows } = await q<{ fenced_in: number }>(ctx.pool, sql, [
      req.runId,
      req.owner,
      req.now,
      req.entry.wakeAt ?? req.now,
      entriesParam(req.runId, [req.entry]),
      ctx.channel,
      wakePayload(ctx, { w: 1 }),
    ]);
    ok = rows[0]?.fenced_in === 1;
  } catch (err) {
    throw mapConflict(err, req.runId);
  }
  if (!ok) throw await refusal(ctx, req.runId, true);
  ctx.emit([{ kind: "wake" }]);
}

/**
 * The fenced finish, through migration 0017's run_finish for the reason
 * appendAlone uses journal_append: planned once per connection on the
 * primary key. pg_stat_statements (500 runs one at a time) gave the UPDATE
 * sent unprepared 105 µs of planning + 100 µs of execution per call.
 */
export async function finish(ctx: PgContext, req: FinishRequest): Promise<void> {
  const sql = `SELECT ${ctx.s}.run_finish($1::text, $2::text, $3::bigint, $4::text, $5::json, $6::jsonb) AS ok`;
  const { rows } = await q<{ ok: boolean }>(
    ctx.pool,
    sql,
    [
      req.runId,
      req.owner,
      req.now,
      req.status,
      jsonParam(req.output),
      req.error === undefined ? null : JSON.stringify(runError(req.error)),
    ],
    preparedName("finish1", sql),
  );
  if (rows[0]?.ok !== true) throw await refusal(ctx, req.runId, true);
}
