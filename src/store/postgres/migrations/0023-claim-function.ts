/** Migration 0023: the keyed (full) claim as a function, planned once per connection with its plan kept off sequential and bitmap scans. */
import type { Migration } from "./migration.ts";

/**
 * claimSql (postgres-claim.ts: reclaim, unkeyed, keyed walk with the batched guard, loose
 * fallback) word for word as the one query of a PL/pgSQL function, $1 … $5 its parameters in the
 * statement's order (signal, now, max, worker, lease ms). PL/pgSQL plans it on the connection's
 * first call and keeps that plan: sent as a statement it was parsed, analysed and planned on every
 * call, ~1 ms of ~10 per claim in an S5 drain (pg_stat_statements), and a perf profile of the
 * drain's claim/settle loop put parse + analyse + plan at ~20 % of the backend's CPU.
 *
 * A plan made once must not go stale as `messages` grows (see q() in postgres-context.ts; the
 * last attempt, a named statement under a session-wide force_generic_plan, also turned every
 * unnamed settle of that connection generic). Here the settings are the function's own:
 *
 * - `plan_cache_mode = force_generic_plan`: with `auto` PL/pgSQL kept making custom plans (their
 *   estimated cost never lost to the generic one), which is no saving;
 * - `enable_seqscan = off` and `enable_bitmapscan = off`: a plan made while `messages` held a page
 *   neither reads the table whole (the picked rows' UPDATE by ctid is a Tid Scan whatever the
 *   size) nor reads a whole index range through a bitmap where the statement stops at a LIMIT in
 *   seq order (the keyed walk, messages_ready_keyed); postgres-prepared.test.ts checks the plan
 *   made on a 3-row, analysed table once 20 000 more rows are queued.
 *
 * The guard is unchanged: claim_keys_free and claim_key_free are VOLATILE and take their fresh
 * snapshots inside the function as they did inside the statement; the statement itself reads in
 * one snapshot taken when it starts, as before. Measured: bench/README.md, "S5, fourth pass".
 */
export const m0023: Migration = {
  id: 23,
  name: "claim-function",
  sql: (s) => `
CREATE FUNCTION ${s}.claim_messages(p_signal text, p_now bigint, p_max integer, p_worker text, p_lease bigint)
RETURNS TABLE (id text, signal text, key text, payload jsonb, parent_run_id text, attempts integer,
  created_at bigint, locked_by text, lease_expires_at bigint, seq bigint, ord1 bigint, ord2 bigint)
LANGUAGE plpgsql VOLATILE
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET enable_bitmapscan = off AS $fn$
#variable_conflict use_column
BEGIN
  RETURN QUERY
WITH RECURSIVE
reclaim AS (
  SELECT m.id, m.ctid, m.lease_expires_at AS expired_at, m.seq FROM ${s}.messages m
  WHERE m.signal = $1 AND m.status = 'inflight' AND m.lease_expires_at <= $2
    AND (m.key IS NULL OR (
  CASE WHEN EXISTS (
    SELECT 1 FROM ${s}.messages o
    WHERE o.signal = m.signal AND o.key = m.key AND o.seq < m.seq AND o.status IN ('pending', 'inflight'))
  THEN false ELSE ${s}.claim_key_free(m.signal, m.key, m.id, $2) END))
  ORDER BY m.lease_expires_at, m.seq
  LIMIT $3
  FOR UPDATE SKIP LOCKED
),
need AS (SELECT GREATEST($3 - (SELECT count(*) FROM reclaim), 0) AS n),
unkeyed AS (
  SELECT m.id, m.ctid, m.seq FROM ${s}.messages m
  WHERE m.signal = $1 AND m.status = 'pending' AND m.key IS NULL
  ORDER BY m.seq
  LIMIT (SELECT n FROM need)
  FOR UPDATE SKIP LOCKED
),
busy AS (
  -- Keys held right now (live leases): when few (hot keys), their queued rows are the bulk of a
  -- blocked backlog, and an array test drops them before the head probe. Capped: the test is
  -- linear in the array, and with ~500 keys held (a deep prefetch over 1 000 keys) it cost more
  -- than the probes it saved. Keys left out are still caught by the head probe.
  SELECT coalesce(array_agg(key), '{}') AS keys FROM (
    SELECT DISTINCT key FROM ${s}.messages
    WHERE signal = $1 AND status = 'inflight' AND key IS NOT NULL AND lease_expires_at > $2
    LIMIT 64) b
),
keyed_cand AS (
  SELECT m.id, m.ctid, m.seq, m.key
  FROM (
    SELECT w.ctid, w.seq FROM (
      SELECT ctid, seq, key FROM ${s}.messages
      WHERE signal = $1 AND status = 'pending' AND key IS NOT NULL
      ORDER BY seq LIMIT GREATEST(256, 4 * $3)) w
    WHERE w.key <> ALL ((SELECT keys FROM busy)::text[])
      -- CASE keeps this a per-row index probe. A NOT EXISTS is planned as an anti
      -- join, and one such plan (60 000 queued) read the whole signal through a bitmap
      -- scan for every walked row: 3.8 s per claim.
      AND CASE WHEN EXISTS (
        SELECT 1 FROM ${s}.messages o
        WHERE o.signal = $1 AND o.key = w.key AND o.seq < w.seq AND o.status IN ('pending', 'inflight'))
      THEN false ELSE true END
    ORDER BY w.seq
    OFFSET 0 -- a fence: heads are found here, before the join locks rows (in seq order, lazily)
  ) h
  -- By ctid, and no second head probe: the walk above read these row versions in this
  -- statement's snapshot, so a probe on m would repeat its answer. A row changed since then
  -- fails the lock's recheck (new version, other ctid, not pending) and is skipped; a claim
  -- committed meanwhile on an older row of the key is the guard's to see (keyed_free).
  -- Measured (EXPLAIN ANALYZE, 1 000 keys × 50, 260 heads): 4 949 → 1 899 buffers, ~6.6 → ~1.8 ms.
  JOIN ${s}.messages m ON m.ctid = h.ctid
  WHERE m.status = 'pending'
  ORDER BY h.seq
  LIMIT (SELECT n FROM need)
  FOR UPDATE OF m SKIP LOCKED
),
keyed_free AS (
  -- The guard for all candidate heads at once (claim_keys_free, migration 0002); a head whose
  -- key it refuses stays locked but untouched until this statement commits.
  SELECT CASE WHEN EXISTS (SELECT 1 FROM keyed_cand)
    THEN ${s}.claim_keys_free($1, ARRAY(SELECT key FROM keyed_cand), $2)
    ELSE '{}'::text[] END AS keys
),
keyed AS (
  SELECT c.id, c.ctid, c.seq FROM keyed_cand c WHERE c.key = ANY ((SELECT keys FROM keyed_free)::text[])
),
short AS (
  -- CASE: the count below runs only when the walk came back short. It asks "more
  -- keyed rows queued than the walk looks at?" without ORDER BY, so any scan can
  -- stop after that many rows (with ORDER BY … OFFSET one plan sorted all 53 000).
  SELECT (SELECT n FROM need) - (SELECT count(*) FROM keyed) AS n
  WHERE CASE WHEN (SELECT count(*) FROM keyed) < (SELECT n FROM need)
    THEN (SELECT count(*) FROM (
            SELECT 1 FROM ${s}.messages
            WHERE signal = $1 AND status = 'pending' AND key IS NOT NULL
            LIMIT GREATEST(256, 4 * $3) + 1) x) > GREATEST(256, 4 * $3)
    ELSE false END
),
loose_keys (key, depth) AS (
  (SELECT key, 1 FROM ${s}.messages
   WHERE signal = $1 AND key IS NOT NULL AND status IN ('pending', 'inflight') AND EXISTS (SELECT 1 FROM short)
   ORDER BY key LIMIT 1)
  UNION ALL
  SELECT nxt.key, k.depth + 1 FROM loose_keys k CROSS JOIN LATERAL (
    SELECT key FROM ${s}.messages
    WHERE signal = $1 AND key > k.key AND status IN ('pending', 'inflight')
    ORDER BY key LIMIT 1) nxt
  WHERE k.depth < 1000
),
loose AS (
  SELECT m.id, m.ctid, m.seq
  FROM (SELECT h.id, h.seq FROM loose_keys k CROSS JOIN LATERAL (
          SELECT id, seq, status FROM ${s}.messages
          WHERE signal = $1 AND key = k.key AND status IN ('pending', 'inflight')
          ORDER BY seq LIMIT 1) h
        WHERE h.status = 'pending'
        ORDER BY h.seq) c
  JOIN ${s}.messages m ON m.id = c.id
  WHERE m.status = 'pending' AND m.id NOT IN (SELECT id FROM keyed_cand) AND 
  CASE WHEN EXISTS (
    SELECT 1 FROM ${s}.messages o
    WHERE o.signal = m.signal AND o.key = m.key AND o.seq < m.seq AND o.status IN ('pending', 'inflight'))
  THEN false ELSE ${s}.claim_key_free(m.signal, m.key, m.id, $2) END
  ORDER BY c.seq
  LIMIT coalesce((SELECT n FROM short), 0)
  FOR UPDATE OF m SKIP LOCKED
),
picked AS (
  SELECT ctid FROM reclaim
  UNION ALL
  (SELECT ctid FROM (
     SELECT ctid, seq FROM unkeyed UNION ALL SELECT ctid, seq FROM keyed UNION ALL SELECT ctid, seq FROM loose) r
   ORDER BY seq LIMIT (SELECT n FROM need))
),
upd AS (
  -- By ctid: every picked row is locked by this statement, so it cannot move. (A join
  -- on id was planned as a nested loop over picked — estimated at 4 rows — and cost
  -- ~8 ms for 282 rows, quadratic.)
  UPDATE ${s}.messages m
  SET status = 'inflight', locked_by = $4, lease_expires_at = $2::bigint + $5::bigint,
      attempts = m.attempts + 1, updated_at = $2
  WHERE m.ctid = ANY (ARRAY(SELECT ctid FROM picked))
  RETURNING m.id, m.signal, m.key, m.payload, m.parent_run_id, m.attempts, m.created_at, m.locked_by, m.lease_expires_at, m.seq
)
-- Reclaimed rows carry their old expiry for ordering (reclaim is small: expired leases only).
SELECT u.*, r.expired_at AS ord1, u.seq AS ord2 FROM upd u LEFT JOIN reclaim r ON r.id = u.id;
END $fn$;
`,
};
