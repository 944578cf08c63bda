/** Migration 0020: the once consumer's lone delivered settle as a function, planned once per connection and kept off sequential scans. */
import type { Migration } from "./migration.ts";

/**
 * The lone delivered settle (one message delivered: S4's settles, and the lone ones of any drain;
 * postgres-settle.ts's settleDeliveredSql UPDATE for one primary key plus its retry lookup) as the
 * one query of a PL/pgSQL function ($1 … $6 are its parameters, in the statement's order), which
 * plans it once per connection instead of on every call. Its text lives here only: the TS copy it
 * was written from (settleDeliveredOneSql) went when the call (settleDeliveredOneCall) replaced it.
 * This comment is not migration text; the `sql` below is frozen.
 * pg_stat_statements on a private cluster, S5 drain: the statement as sent planned 0.34–0.41 ms
 * per call, as long as its execution (0.30–0.37 ms). Made once, the plan must not go stale as
 * `messages` grows; as in 0017:
 *
 * - `SET enable_seqscan = off`, so a plan made while `messages` held a page is never a
 *   sequential scan kept for the connection's life (the reason the statement was not prepared);
 * - the UPDATE's only indexable condition is the primary key (the fence's locked_by and attempts
 *   have no index). `done` (a retry's row, behind NOT EXISTS (upd)) is read by primary key or
 *   through messages_delivered on updated_at = now: a handful of rows either way.
 *
 * Measured (bench/README.md, "Settle planning"): backend CPU per lone settle 1 200 -> 475 µs
 * (shared cluster) and 925 -> 275 µs (private cluster), medians of 6 interleaved rounds.
 * `notified` is pg_notify's void as text (a result column cannot be void); nothing reads it.
 */
export const m0020: Migration = {
  id: 20,
  name: "settle-delivered-one",
  sql: (s) => `
CREATE FUNCTION ${s}.settle_delivered_one(p_id text, p_attempt integer, p_now bigint, p_worker text,
  p_channel text, p_origin text)
RETURNS TABLE (applied text[], signals text[], notified text)
LANGUAGE plpgsql VOLATILE SET enable_seqscan = off AS $fn$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  WITH upd AS (
    UPDATE ${s}.messages m
    SET status = 'delivered', locked_by = NULL, lease_expires_at = NULL, updated_at = $3::bigint
    WHERE m.id = $1::text AND m.locked_by = $4::text AND m.attempts = $2::integer
    RETURNING m.id, m.signal, m.key IS NOT NULL AS frees
  ),
  done AS (
    -- A retry of a settle that committed (see generalDone).
    SELECT m.id, m.signal, m.key IS NOT NULL AS frees FROM ${s}.messages m
    WHERE NOT EXISTS (SELECT 1 FROM upd) AND m.id = $1::text AND m.status = 'delivered' AND m.locked_by IS NULL
      AND m.attempts = $2::integer AND m.updated_at = $3::bigint
  ),
  settled AS (
    SELECT * FROM upd UNION ALL SELECT * FROM done
  )
  SELECT (SELECT CASE WHEN false THEN NULL ELSE coalesce(array_agg(id), '{}') END FROM settled) AS applied,
         (SELECT coalesce(array_agg(DISTINCT signal), '{}') FROM settled WHERE frees) AS signals,
         (SELECT pg_notify($5, CASE WHEN length(payload) <= 7000 THEN payload
                                ELSE json_build_object('o', $6::text, 'w', 1)::text END)
          FROM (SELECT json_build_object('o', $6::text, 's', array_agg(DISTINCT signal))::text AS payload
                FROM settled WHERE frees HAVING count(*) > 0) woke
          WHERE $5::text IS NOT NULL)::text AS notified;
END $fn$;
`,
};
