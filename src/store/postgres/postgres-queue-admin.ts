import type { SignalStats, StoredMessage } from "../types.ts";
import { type PgContext, wakePayload } from "./postgres-context.ts";
import { type MessageRow, toStoredMessage } from "./postgres-rows.ts";

/** Operator and inspection queries of the queue: cold paths, one statement each. */

export async function deadLetters(ctx: PgContext, signal: string, limit?: number): Promise<StoredMessage[]> {
  const { rows } = await ctx.pool.query<MessageRow>(
    `SELECT * FROM ${ctx.s}.messages WHERE signal = $1 AND status = 'dead' ORDER BY seq LIMIT $2`,
    [signal, limit ?? null],
  );
  return rows.map(toStoredMessage);
}

export async function getMessage(ctx: PgContext, id: string): Promise<StoredMessage | undefined> {
  const { rows } = await ctx.pool.query<MessageRow>(`SELECT * FROM ${ctx.s}.messages WHERE id = $1`, [id]);
  return rows[0] === undefined ? undefined : toStoredMessage(rows[0]);
}

/**
 * dead -> pending, attempts and lock reset, failure history kept. The row
 * takes a fresh `seq`: it rejoins its key's queue at the back, so a key's
 * head never moves to an older row while a newer one may be inflight.
 */
export async function replay(ctx: PgContext, signal: string, ids: readonly string[] | "all", now: number): Promise<string[]> {
  const payload = wakePayload(ctx, { e: [signal] });
  const { rows } = await ctx.pool.query<{ id: string }>(
    `WITH upd AS (
       UPDATE ${ctx.s}.messages
       SET status = 'pending', attempts = 0, locked_by = NULL, lease_expires_at = NULL, updated_at = $3,
           seq = nextval(pg_get_serial_sequence('${ctx.s}.messages', 'seq'))
       WHERE id IN (
         SELECT id FROM ${ctx.s}.messages
         WHERE signal = $1 AND status = 'dead' AND ($2::text[] IS NULL OR id = ANY($2::text[]))
         ORDER BY seq)
       RETURNING id, seq)
     SELECT id, (SELECT pg_notify($4, $5) WHERE $5::text IS NOT NULL AND EXISTS (SELECT 1 FROM upd)) AS n
     FROM upd ORDER BY seq`,
    [signal, ids === "all" ? null : ids, now, ctx.channel, payload],
  );
  if (rows.length > 0) ctx.emit([{ kind: "enqueued", signal }]);
  return rows.map((r) => r.id);
}

export async function discard(ctx: PgContext, signal: string, ids: readonly string[] | "all"): Promise<string[]> {
  const { rows } = await ctx.pool.query<{ id: string }>(
    `DELETE FROM ${ctx.s}.messages
     WHERE signal = $1 AND status = 'dead' AND ($2::text[] IS NULL OR id = ANY($2::text[]))
     RETURNING id, seq`,
    [signal, ids === "all" ? null : ids],
  );
  return rows.map((r) => r.id);
}

export async function stats(ctx: PgContext, signal: string, now: number): Promise<SignalStats> {
  const { rows } = await ctx.pool.query<{ status: string; n: string; oldest: string | null }>(
    `SELECT status, count(*) AS n, min(created_at) FILTER (WHERE status = 'pending') AS oldest
     FROM ${ctx.s}.messages WHERE signal = $1 GROUP BY status`,
    [signal],
  );
  const out: SignalStats = { signal, pending: 0, inflight: 0, dead: 0, delivered: 0, oldestPendingAgeMs: null };
  for (const r of rows) {
    if (r.status === "pending" || r.status === "inflight" || r.status === "dead" || r.status === "delivered") out[r.status] = Number(r.n);
    if (r.oldest !== null) out.oldestPendingAgeMs = Math.max(0, now - Number(r.oldest));
  }
  return out;
}

export async function nextLeaseExpiry(ctx: PgContext, signal: string): Promise<number | null> {
  const { rows } = await ctx.pool.query<{ at: string | null }>(
    `SELECT min(lease_expires_at) AS at FROM ${ctx.s}.messages WHERE signal = $1 AND status = 'inflight'`,
    [signal],
  );
  return rows[0]?.at == null ? null : Number(rows[0].at);
}

export async function pruneDelivered(ctx: PgContext, before: number): Promise<number> {
  const res = await ctx.pool.query(`DELETE FROM ${ctx.s}.messages WHERE status = 'delivered' AND updated_at < $1`, [before]);
  return res.rowCount ?? 0;
}
