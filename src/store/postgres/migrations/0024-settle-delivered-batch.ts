/** Migration 0024: the all-delivered batch settle as a function, planned once per connection with its plan kept off sequential and bitmap scans and nested loops. */
import type { Migration } from "./migration.ts";

/**
 * settleDeliveredSql (postgres-settle.ts: the common batch, every message delivered by one holder)
 * word for word as the one query of a PL/pgSQL function, $1 … $6 its parameters in the statement's
 * order (ids, attempts, now, worker, channel, origin); `notified` is pg_notify's void as text, as in
 * 0020. Sent as a statement it was parsed, analysed and planned on every call (0.32 ms of planning
 * a call in an S5 drain, pg_stat_statements). As in 0023 the settings are the function's own:
 *
 * - `plan_cache_mode = force_generic_plan` (made once, kept for the connection);
 * - `enable_nestloop = off`: the generic plan knows no array length, and without it joined
 *   unnest($1) to the primary-key probes as a nested loop that unnests the ids again per row
 *   (bench/README.md, "Settle planning": 25.9 ms vs 3.4 ms for 130 ids over 50 000 rows); with it,
 *   the ids are hashed as in the custom plan;
 * - `enable_seqscan = off`, `enable_bitmapscan = off`: a plan made while `messages` held a page
 *   stays on messages_pkey (postgres-prepared.test.ts checks the plan made on a 3-row analysed table).
 *
 * Measured: bench/README.md, "S5, fourth pass".
 */
export const m0024: Migration = {
  id: 24,
  name: "settle-delivered-batch",
  sql: (s) => `
CREATE FUNCTION ${s}.settle_delivered_batch(p_ids text[], p_attempts integer[], p_now bigint, p_worker text,
  p_channel text, p_origin text)
RETURNS TABLE (applied text[], signals text[], notified text)
LANGUAGE plpgsql VOLATILE
SET plan_cache_mode = force_generic_plan SET enable_nestloop = off SET enable_seqscan = off
SET enable_bitmapscan = off AS $fn$
#variable_conflict use_column
BEGIN
  RETURN QUERY
WITH upd AS (
  UPDATE ${s}.messages m
  SET status = 'delivered', locked_by = NULL, lease_expires_at = NULL, updated_at = $3
  FROM unnest($1::text[], $2::integer[]) AS i(id, attempt)
  -- ANY (ARRAY(subquery)) keeps the primary key (see generalUpdate). No status test: locked_by is
  -- set only while a message is inflight, and as an index condition "status = 'inflight'"
  -- had the planner read every inflight row of every signal (a BitmapAnd) on each settle.
  WHERE m.id = ANY (ARRAY(SELECT unnest($1::text[])))
    AND m.id = i.id AND m.locked_by = $4 AND m.attempts = i.attempt
  RETURNING m.id, m.signal, m.key IS NOT NULL AS frees
),
done AS (
  SELECT m.id, m.signal, m.key IS NOT NULL AS frees FROM ${s}.messages m JOIN unnest($1::text[], $2::integer[]) AS i(id, attempt) ON m.id = i.id
  WHERE (SELECT count(*) FROM upd) < cardinality($1::text[])
    AND m.id = ANY (ARRAY(SELECT unnest($1::text[])))
    AND m.status = 'delivered' AND m.locked_by IS NULL AND m.attempts = i.attempt AND m.updated_at = $3::bigint
),
settled AS (
  SELECT * FROM upd UNION ALL SELECT * FROM done
)
SELECT (SELECT CASE WHEN count(*) = cardinality($1::text[]) THEN NULL ELSE coalesce(array_agg(id), '{}') END FROM settled) AS applied,
       (SELECT coalesce(array_agg(DISTINCT signal), '{}') FROM settled WHERE frees) AS signals,
       (SELECT pg_notify($5, CASE WHEN length(payload) <= 7000 THEN payload
                              ELSE json_build_object('o', $6::text, 'w', 1)::text END)
        FROM (SELECT json_build_object('o', $6::text, 's', array_agg(DISTINCT signal))::text AS payload
              FROM settled WHERE frees HAVING count(*) > 0) woke
        WHERE $5::text IS NOT NULL)::text AS notified;
END $fn$;
`,
};
