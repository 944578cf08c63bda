/** Operator and inspection queries of the postgres queue. */
import type { SignalStats, StoredMessage } from "../types.ts";
import { type PgContext, q, unique, wakePayload } from "./postgres-context.ts";
import { type MessageRow, toStoredMessage } from "./postgres-rows.ts";

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
 * Each count is an index-only scan of that status's partial index (pending:
 * the two ready indexes; delivered: migration 0014), never a read of the
 * table's rows. The oldest pending message is the head of each ready index in
 * emit order (one row each).
 */
export async function stats(ctx: PgContext, signal: string, now: number): Promise<SignalStats> {
  const m = `${ctx.s}.messages`;
  const { rows } = await q<{
    pending: number;
    inflight: number;
    dead: number;
    delivered: number;
    oldest: number | null;
  }>(
    ctx.pool,
    `SELECT
       (SELECT count(*) FROM ${m} WHERE signal = $1 AND status = 'pending' AND key IS NULL)::int
         + (SELECT count(*) FROM ${m} WHERE signal = $1 AND status = 'pending' AND key IS NOT NULL)::int AS pending,
       (SELECT count(*) FROM ${m} WHERE signal = $1 AND status = 'inflight')::int AS inflight,
       (SELECT count(*) FROM ${m} WHERE signal = $1 AND status = 'dead')::int AS dead,
       (SELECT count(*) FROM ${m} WHERE signal = $1 AND status = 'delivered')::int AS delivered,
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
         SELECT id FROM ${ctx.s}.messages WHERE status = 'delivered' AND updated_at < $1 LIMIT $2)`,
      [before, PRUNE_BATCH],
    );
    total += rowCount;
    if (rowCount < PRUNE_BATCH) return total;
  }
}
