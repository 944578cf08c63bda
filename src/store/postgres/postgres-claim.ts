import type { ClaimedMessage, ClaimRequest } from "../types.ts";
import { type PgContext, q } from "./postgres-context.ts";
import { type MessageRow, toClaimedMessage } from "./postgres-rows.ts";

/**
 * THE hot query: one statement claims up to `max` messages of one signal.
 *
 * Eligible: `pending`, or `inflight` whose lease expired at `$now` (lazy
 * reclaim — no sweeper). A keyed message is eligible only as the head of its
 * (signal, key): no older pending/inflight message of that key exists.
 * Expired leases are taken first, by expiry (they are the oldest work), then
 * pending rows in `seq` order — the memory driver's order.
 *
 * Why the per-key guard (claim_key_free, migration 0001): SKIP LOCKED alone
 * keeps two claimers off the same ROW, not off the same KEY. Heads are judged
 * in the statement's snapshot, and a snapshot can disagree with a concurrent
 * claimer's about which row is the head: an emit that committed late with a
 * smaller seq, or a replayed dead letter, makes a different row the head for a
 * claimer that started later — while the first claim is not yet committed and
 * so invisible. Both would then go inflight. The guard takes a transaction
 * advisory lock on hash(signal, key) with pg_try_advisory_xact_lock (a busy
 * key is skipped, never waited on) and then, in a fresh snapshot (VOLATILE
 * plpgsql), checks that no other message of the key holds a live lease. A
 * claim that committed earlier is visible to that check; one that has not
 * still holds the lock. The guard runs only for keyed heads, so unkeyed
 * claims pay nothing.
 *
 * Measured (PostgreSQL 15, 2-core box, see bench/postgres-drain.ts and
 * postgres-claim.test.ts):
 * - 4 stores on separate pools claiming 2 000 messages over 50 keys in
 *   parallel: every message claimed exactly once, never two of a key inflight.
 *   The same test with the guard replaced by `true` and a late-committing
 *   emit reproduces the double-inflight race.
 * - drain of 100 000 unkeyed messages, concurrency 32, claim batches + batched
 *   settle: see the figures recorded in bench/postgres-drain.ts.
 * Cost model: the ready scan walks messages_ready in seq order and stops at
 * LIMIT, so unkeyed claims are O(max). A keyed backlog whose heads are all
 * inflight is walked row by row (one index probe per row) until enough heads
 * are found — acceptable for tens of thousands of queued rows per signal.
 */
export const claimSql = (s: string): string => `
WITH reclaim AS (
  SELECT m.id, m.lease_expires_at AS expired_at, m.seq FROM ${s}.messages m
  WHERE m.signal = $1 AND m.status = 'inflight' AND m.lease_expires_at <= $2
    AND (m.key IS NULL OR (
      NOT EXISTS (
        SELECT 1 FROM ${s}.messages o
        WHERE o.signal = m.signal AND o.key = m.key AND o.seq < m.seq AND o.status IN ('pending', 'inflight'))
      AND ${s}.claim_key_free(m.signal, m.key, m.id, $2)))
  ORDER BY m.lease_expires_at, m.seq
  LIMIT $3
  FOR UPDATE SKIP LOCKED
),
ready AS (
  SELECT m.id, m.seq FROM ${s}.messages m
  WHERE m.signal = $1 AND m.status = 'pending'
    AND (m.key IS NULL OR (
      NOT EXISTS (
        SELECT 1 FROM ${s}.messages o
        WHERE o.signal = m.signal AND o.key = m.key AND o.seq < m.seq AND o.status IN ('pending', 'inflight'))
      AND ${s}.claim_key_free(m.signal, m.key, m.id, $2)))
  ORDER BY m.seq
  LIMIT GREATEST($3 - (SELECT count(*) FROM reclaim), 0)
  FOR UPDATE SKIP LOCKED
)
UPDATE ${s}.messages m
SET status = 'inflight', locked_by = $4, lease_expires_at = $2::bigint + $5::bigint,
    attempts = m.attempts + 1, updated_at = $2
FROM (SELECT id, expired_at AS ord1, seq AS ord2 FROM reclaim
      UNION ALL SELECT id, NULL, seq FROM ready) picked
WHERE m.id = picked.id
RETURNING m.*, picked.ord1, picked.ord2`;

type ClaimRow = MessageRow & { ord1: number | null; ord2: number };

export async function claim(ctx: PgContext, req: ClaimRequest): Promise<ClaimedMessage[]> {
  if (req.max <= 0) return [];
  const { rows } = await q<ClaimRow>(ctx.pool, claimSql(ctx.s), [
    req.signal,
    req.now,
    req.max,
    req.worker,
    req.leaseMs,
  ]);
  // Reclaimed (ord1 = old expiry) before ready (ord1 NULL), then emit order.
  rows.sort((a, b) => (a.ord1 ?? Infinity) - (b.ord1 ?? Infinity) || a.ord2 - b.ord2);
  return rows.map(toClaimedMessage);
}
