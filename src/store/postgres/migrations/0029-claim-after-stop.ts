/** Migration 0029: a claim that reclaims a lease a graceful stop left to lapse adds no attempt. */
import type { Migration } from "./migration.ts";

/**
 * claimSql (postgres-claim.ts) as of this migration, word for word, replacing the body 0026
 * installed (0028's signature: payload as json; same settings). One change, in `upd`: a row whose
 * holder ends in `#stopped` — a lease Store.leaveClaimsToLease marked at a graceful stop's deadline,
 * its handler cut short by the deploy rather than crashed — is claimed as the same attempt, not the
 * next. Before, a handler longer than shutdownTimeoutMs spent one attempt per deploy and, a few
 * deploys on, was dead-lettered as "crashed". Pending rows have no holder, so the common path adds
 * one as before; the CASE is a LIKE on the rows updated, nothing more is read.
 */
export const m0029: Migration = {
  id: 29,
  name: "claim-after-stop",
  // Code at 28 calls claim_messages the same way and never marks '#stopped' holders: it runs as before.
  runsWith: 28,
  sql: (s) => `
CREATE OR REPLACE FUNCTION ${s}.claim_messages(p_signal text, p_now bigint, p_max integer, p_worker text, p_lease bigint)
RETURNS TABLE (id text, signal text, key text, payload json, parent_run_id text, attempts integer,
  created_at bigint, locked_by text, lease_expires_at bigint, seq bigint, ord1 bigint, ord2 bigint)
LANGUAGE plpgsql VOLATILE
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET enable_bitmapscan = off AS $fn$
#variable_conflict use_column
BEGIN
  RETURN QUERY
WITH RECURSIVE
reclaim_cand AS (
  SELECT m.id, m.ctid, m.key, m.lease_expires_at AS expired_at, m.seq FROM ${s}.messages m
  WHERE m.signal = $1 AND m.status = 'inflight' AND m.lease_expires_at <= $2
    AND (m.key IS NULL OR (
  CASE WHEN EXISTS (
    SELECT 1 FROM ${s}.messages o
    WHERE o.signal = m.signal AND o.key = m.key AND o.seq < m.seq AND o.status IN ('pending', 'inflight'))
  THEN false ELSE true END))
  ORDER BY m.lease_expires_at, m.seq
  LIMIT $3
  FOR UPDATE SKIP LOCKED
),
reclaim AS (
  SELECT c.id, c.ctid, c.expired_at, c.seq FROM reclaim_cand c
  WHERE c.key IS NULL OR c.key = ANY ((SELECT keys FROM (
    SELECT CASE WHEN EXISTS (SELECT 1 FROM reclaim_cand WHERE key IS NOT NULL)
      THEN ${s}.claim_keys_free($1, ARRAY(SELECT key FROM reclaim_cand WHERE key IS NOT NULL), $2)
      ELSE '{}'::text[] END AS keys) f)::text[])
),
need AS (SELECT GREATEST($3 - (SELECT count(*) FROM reclaim), 0) AS n),
unkeyed AS (
  SELECT m.id, m.ctid, m.seq FROM ${s}.messages m
  WHERE m.signal = $1 AND m.status = 'pending' AND m.key IS NULL
  ORDER BY m.seq
  LIMIT (SELECT n FROM need)
  FOR UPDATE SKIP LOCKED
),
keyed_cand AS (
  SELECT m.id, m.ctid, m.seq, m.key
  FROM (
    -- The head probe without a probe: the walk (the oldest pending keyed rows, in seq order) and
    -- every inflight keyed row of the signal, sorted by (key, seq); a key's first row is its head
    -- when it is a walked (pending) row — no row of the key older than it is pending (it would
    -- be in the walk before it) or inflight. One read of the leases and one sort instead of a
    -- probe per walked row and the busy-key array test; joins here were planned as nested loops.
    SELECT w.ctid, w.seq FROM (
      SELECT DISTINCT ON (key) ctid, seq, key FROM (
        SELECT * FROM (
          SELECT ctid, seq, key FROM ${s}.messages
          WHERE signal = $1 AND status = 'pending' AND key IS NOT NULL
          ORDER BY seq LIMIT GREATEST(256, 4 * $3)) w0
        UNION ALL
        SELECT NULL::tid, seq, key FROM ${s}.messages
        WHERE signal = $1 AND status = 'inflight' AND key IS NOT NULL) u
      ORDER BY key, seq) w
    WHERE w.ctid IS NOT NULL
    ORDER BY w.seq
    OFFSET 0 -- a fence: heads are found here, before the join locks rows (in seq order, lazily)
  ) h
  -- By ctid: the walk above read these row versions in this statement's snapshot. A row changed
  -- since then fails the lock's recheck (new version, other ctid, not pending) and is skipped; a
  -- claim committed meanwhile on an older row of the key is the guard's to see (keyed_free).
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
  -- IS TRUE keeps the IN a hashed subplan (as a plain IN it was a nested loop semi join).
  SELECT c.id, c.ctid, c.seq FROM keyed_cand c WHERE (c.key IN (SELECT unnest(f.keys) FROM keyed_free f)) IS TRUE
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
loose_cand AS (
  SELECT m.id, m.ctid, m.seq, m.key
  FROM (SELECT h.id, h.seq FROM loose_keys k CROSS JOIN LATERAL (
          SELECT id, seq, status FROM ${s}.messages
          WHERE signal = $1 AND key = k.key AND status IN ('pending', 'inflight')
          ORDER BY seq LIMIT 1) h
        WHERE h.status = 'pending'
        ORDER BY h.seq) c
  JOIN ${s}.messages m ON m.id = c.id
  WHERE m.status = 'pending' AND m.id NOT IN (SELECT id FROM keyed_cand)
  ORDER BY c.seq
  LIMIT coalesce((SELECT n FROM short), 0)
  FOR UPDATE OF m SKIP LOCKED
),
loose AS (
  -- The loose heads were probed in this snapshot (LIMIT 1 per key above); the guard as for keyed.
  SELECT c.id, c.ctid, c.seq FROM loose_cand c WHERE c.key = ANY ((SELECT keys FROM (
    SELECT CASE WHEN EXISTS (SELECT 1 FROM loose_cand)
      THEN ${s}.claim_keys_free($1, ARRAY(SELECT key FROM loose_cand), $2)
      ELSE '{}'::text[] END AS keys) f)::text[])
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
  -- A lease a graceful stop left (holder '<worker>#stopped', leaveClaimsToLease) is the same
  -- attempt again: no + 1 (claim-rules claimCounts). Pending rows have no holder (NULL: + 1).
  UPDATE ${s}.messages m
  SET status = 'inflight', locked_by = $4, lease_expires_at = $2::bigint + $5::bigint,
      attempts = m.attempts + CASE WHEN m.locked_by LIKE '%#stopped' THEN 0 ELSE 1 END, updated_at = $2
  WHERE m.ctid = ANY (ARRAY(SELECT ctid FROM picked))
  RETURNING m.id, m.signal, m.key, m.payload, m.parent_run_id, m.attempts, m.created_at, m.locked_by, m.lease_expires_at, m.seq
)
-- Reclaimed rows carry their old expiry for ordering (reclaim is small: expired leases only).
SELECT u.*, r.expired_at AS ord1, u.seq AS ord2 FROM upd u LEFT JOIN reclaim r ON r.id = u.id;
END $fn$;
`,
};
