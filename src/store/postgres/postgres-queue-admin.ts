/** Operator and inspection queries of the postgres queue. */
import type { ResettleDelivered, SignalStats, StoredMessage } from "../types.ts";
import { type PgContext, q, unique, wakePayload } from "./postgres-context.ts";
import { jsonParam, type MessageRow, toStoredMessage } from "./postgres-rows.ts";

/** Operator and inspection queries of the queue: cold paths, one statement each. */

export async function deadLetters(ctx: PgContext, signal: string, limit?: number): Promise<StoredMessage[]> {
  const { rows } = await q<MessageRow>(
    ctx.pool,
    `SELECT * FROM ${ctx.s}.messages WHERE signal = $1 AND status = 'dead'
     ORDER BY created_at, seq LIMIT CASE WHEN $2::bigint IS NULL THEN NULL ELSE GREATEST($2::bigint, 0) END`,
    [signal, limit ?? null],
  );
  return rows.map(toStoredMessage);
}

export async function getMessage(ctx: PgContext, id: string): Promise<StoredMessage | undefined> {
  const { rows } = await q<MessageRow>(ctx.pool, `SELECT * FROM ${ctx.s}.messages WHERE id = $1`, [id]);
  return rows[0] === undefined ? undefined : toStoredMessage(rows[0]);
}

/**
 * Result order of replay/discard: "all" goes oldest first (like deadLetters),
 * an id list keeps the caller's order, duplicates dropped.
 */
function inOrder(ids: readonly string[] | "all", rows: readonly { id: string }[]): string[] {
  if (ids === "all") return rows.map((r) => r.id);
  const hit = new Set(rows.map((r) => r.id));
  return unique(ids).filter((id) => hit.has(id));
}

const deadTarget = `signal = $1 AND status = 'dead' AND ($2::text[] IS NULL OR id = ANY($2::text[]))`;

/**
 * dead -> pending, attempts and lock reset, failure history kept. The row
 * keeps its `seq`, so it rejoins its key's queue where it was emitted (as the
 * memory driver does); the claim's per-key guard keeps it from going inflight
 * beside a newer message of its key that is still held.
 */
export async function replay(
  ctx: PgContext,
  signal: string,
  ids: readonly string[] | "all",
  now: number,
): Promise<string[]> {
  const payload = wakePayload(ctx, { e: [signal] });
  const { rows } = await q<{ id: string }>(
    ctx.pool,
    `WITH upd AS (
       UPDATE ${ctx.s}.messages
       SET status = 'pending', attempts = 0, replays = replays + 1, locked_by = NULL, lease_expires_at = NULL, updated_at = $3
       WHERE ${deadTarget}
       RETURNING id, created_at, seq),
     n AS (SELECT pg_notify($4, $5) FROM (SELECT 1 FROM upd LIMIT 1) one WHERE $5::text IS NOT NULL)
     SELECT id, (SELECT count(*) FROM n) AS notified FROM upd ORDER BY created_at, seq`,
    [signal, ids === "all" ? null : ids, now, ctx.channel, payload],
  );
  if (rows.length > 0) ctx.emit([{ kind: "enqueued", signal }]);
  return inOrder(ids, rows);
}

/**
 * A delivered message settled again (resettle-rules), in one statement: the upsert recreates a
 * pruned message, and otherwise updates the row only while it is `delivered` with the attempts
 * given and the failure is not already its last — the row lock taken by ON CONFLICT makes that the
 * fence against a claim or a replay. The row keeps its `seq`, so a pending one rejoins its key's
 * order where it was emitted (the claim's per-key guard, as for a replay). `already`: the row as it
 * stood before the statement (a CTE's writes are not visible to it) was this call's result, so a
 * retry after a lost reply reports true and writes nothing.
 */
export async function resettleDelivered(ctx: PgContext, r: ResettleDelivered, now: number): Promise<boolean> {
  const { id, signal, key, payload, parentRunId } = r.message;
  const f = r.failure;
  const failure = JSON.stringify({ code: f.code, message: f.message, at: f.at, attempt: f.attempt });
  const wake = r.status === "pending" ? wakePayload(ctx, { e: [signal] }) : null;
  const { rows } = await q<{ applied: number; already: boolean | null }>(
    ctx.pool,
    `WITH up AS (
       INSERT INTO ${ctx.s}.messages AS m
         (id, signal, key, payload, parent_run_id, created_at, updated_at, status, attempts, failures, replays)
       VALUES ($1::text, $2::text, $3::text, $4::json, $5::text, $6::bigint, $6::bigint, $7::text,
         $8::integer, jsonb_build_array($9::jsonb), $10::integer)
       ON CONFLICT (id) DO UPDATE
         SET status = $7::text, failures = m.failures || jsonb_build_array($9::jsonb), locked_by = NULL,
           lease_expires_at = NULL, updated_at = $6::bigint
         WHERE m.status = 'delivered' AND m.attempts = $8::integer
           AND (m.failures -> -1) IS DISTINCT FROM $9::jsonb
       RETURNING m.id),
     n AS (SELECT pg_notify($11, $12) FROM up WHERE $12::text IS NOT NULL)
     SELECT (SELECT count(*) FROM up)::integer AS applied, (SELECT count(*) FROM n) AS notified,
       (SELECT status = $7::text AND attempts = $8::integer AND failures -> -1 = $9::jsonb
          FROM ${ctx.s}.messages WHERE id = $1::text) AS already`,
    [
      id,
      signal,
      key,
      jsonParam(payload),
      parentRunId,
      now,
      r.status,
      r.attempts,
      failure,
      r.replays ?? 0,
      ctx.channel,
      wake,
    ],
  );
  const row = rows[0];
  if (row !== undefined && row.applied > 0 && r.status === "pending")
    ctx.emit([{ kind: "enqueued", signal }]);
  return row !== undefined && (row.applied > 0 || row.already === true);
}

export async function discard(
  ctx: PgContext,
  signal: string,
  ids: readonly string[] | "all",
): Promise<string[]> {
  const { rows } = await q<{ id: string }>(
    ctx.pool,
    `WITH del AS (DELETE FROM ${ctx.s}.messages WHERE ${deadTarget} RETURNING id, created_at, seq)
     SELECT id FROM del ORDER BY created_at, seq`,
    [signal, ids === "all" ? null : ids],
  );
  return inOrder(ids, rows);
}

/**
 * An operator's removal of pending messages. Racing a claim is safe: a row the claim locked waits
 * here, and is then re-checked and left (it is inflight by then); a row deleted first is gone
 * before the claim's SKIP LOCKED walk reaches it. A keyed head deleted leaves the key's next as the
 * head the claim computes; nothing else records heads.
 */
export async function discardPending(
  ctx: PgContext,
  signal: string,
  ids: readonly string[],
): Promise<string[]> {
  if (ids.length === 0) return [];
  const { rows } = await q<{ id: string }>(
    ctx.pool,
    `DELETE FROM ${ctx.s}.messages WHERE signal = $1 AND status = 'pending' AND id = ANY($2::text[]) RETURNING id`,
    [signal, ids],
  );
  return inOrder(ids, rows);
}

/**
 * Each count is an index-only scan of that status's partial index (pending:
 * the two ready indexes; delivered: migration 0014; delivered with a failure:
 * migration 0031), never a read of the table's rows. The oldest pending message is the head of each ready index in
 * emit order (one row each).
 */
export async function stats(ctx: PgContext, signal: string, now: number): Promise<SignalStats> {
  const m = `${ctx.s}.messages`;
  const { rows } = await q<{
    pending: number;
    inflight: number;
    dead: number;
    delivered: number;
    delivered_failed: number;
    oldest: number | null;
  }>(
    ctx.pool,
    `SELECT
       (SELECT count(*) FROM ${m} WHERE signal = $1 AND status = 'pending' AND key IS NULL)::int
         + (SELECT count(*) FROM ${m} WHERE signal = $1 AND status = 'pending' AND key IS NOT NULL)::int AS pending,
       (SELECT count(*) FROM ${m} WHERE signal = $1 AND status = 'inflight')::int AS inflight,
       (SELECT count(*) FROM ${m} WHERE signal = $1 AND status = 'dead')::int AS dead,
       (SELECT count(*) FROM ${m} WHERE signal = $1 AND status = 'delivered')::int AS delivered,
       (SELECT count(*) FROM ${m} WHERE signal = $1 AND status = 'delivered' AND failures <> '[]'::jsonb)::int
         AS delivered_failed,
       LEAST(
         (SELECT created_at FROM ${m} WHERE signal = $1 AND status = 'pending' AND key IS NULL ORDER BY seq LIMIT 1),
         (SELECT created_at FROM ${m} WHERE signal = $1 AND status = 'pending' AND key IS NOT NULL ORDER BY seq LIMIT 1)
       ) AS oldest`,
    [signal],
  );
  const r = rows[0]!;
  return {
    signal,
    pending: r.pending,
    inflight: r.inflight,
    dead: r.dead,
    delivered: r.delivered,
    deliveredFailed: r.delivered_failed,
    oldestPendingAgeMs: r.oldest === null ? null : Math.max(0, now - Number(r.oldest)),
  };
}

export async function nextLeaseExpiry(ctx: PgContext, signal: string): Promise<number | null> {
  const { rows } = await q<{ at: number | null }>(
    ctx.pool,
    `SELECT min(lease_expires_at) AS at FROM ${ctx.s}.messages WHERE signal = $1 AND status = 'inflight'`,
    [signal],
  );
  return rows[0]?.at ?? null;
}

/**
 * A durable consumer's message delivered at its run's park is kept while that run (its id, or its
 * replay's `<id>.r<n>`: two primary-key probes per row) is unfinished: a failure after the wake
 * settles it again (resettleDelivered).
 * Deletes in batches of PRUNE_BATCH rows, each its own short statement, so a
 * large backlog of delivered rows never holds one long transaction.
 */
const PRUNE_BATCH = 10_000;

export async function pruneDelivered(ctx: PgContext, before: number): Promise<number> {
  let total = 0;
  for (;;) {
    const { rowCount } = await q(
      ctx.pool,
      `DELETE FROM ${ctx.s}.messages WHERE id IN (
         SELECT m.id FROM ${ctx.s}.messages m WHERE m.status = 'delivered' AND m.updated_at < $1
           AND NOT EXISTS (SELECT 1 FROM ${ctx.s}.runs r WHERE r.id IN (m.id, m.id || '.r' || m.replays)
             AND r.status IN ('running', 'sleeping', 'compensating'))
         LIMIT $2)`,
      [before, PRUNE_BATCH],
    );
    total += rowCount;
    if (rowCount < PRUNE_BATCH) return total;
  }
}
