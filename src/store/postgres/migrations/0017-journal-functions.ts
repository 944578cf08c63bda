/** Migration 0017: a lone journal append and a lone run finish as functions, planned once per connection and kept on the runs primary key. */
import type { Migration } from "./migration.ts";

/**
 * S9 (3-step runs one at a time) sends, per run, a start, three appends and a
 * finish. Sent unprepared, the append (an UPDATE-and-INSERT CTE) and the finish
 * were planned on every call: pg_stat_statements on a private cluster, 500
 * runs one at a time, gave the append 274 µs of planning + 178 µs of execution
 * per call and the finish 105 + 100 µs — most of PostgreSQL's ~3.3 ms of CPU
 * per run. Prepared, their generic plan could go stale (a sequential scan made
 * while `runs` held a page, kept until an ANALYZE: see `q()` in
 * postgres-context.ts). In a PL/pgSQL function each statement is planned once
 * per connection, and two things keep that plan on the primary key whatever
 * the statistics when it was made:
 *
 * - `SET enable_seqscan = off` for the function's duration, so a sequential
 *   scan is never the cheap path;
 * - the fence (status, owner) written as one `(…) IS TRUE` test, which no index
 *   can serve, so `id = p_run` (runs_pkey) is the only indexable condition.
 *   Without it, a plan made after ANALYZE of a 3-row `runs` whose indexes still
 *   held 200 000 deleted entries walked runs_list (status leads it): 78–174 ms
 *   a call once 200 000 rows were back (psql, private cluster).
 *
 * Measured (bench/README.md, "S9, third pass"): PostgreSQL CPU per 3-step run
 * ~3.4 → ~1.0 ms on one connection, the same as the statements prepared with
 * their generic plans. The fence is re-checked on the row an UPDATE waits for
 * (READ COMMITTED), exactly as for the statements it replaces.
 */
export const m0017: Migration = {
  id: 17,
  name: "journal-functions",
  sql: (s) => `
CREATE FUNCTION ${s}.journal_append(p_run text, p_owner text, p_now bigint, p_lease_ms bigint, p_entries jsonb)
RETURNS boolean LANGUAGE plpgsql VOLATILE SET enable_seqscan = off AS $fn$
BEGIN
  UPDATE ${s}.runs
  SET updated_at = p_now,
      lease_expires_at = CASE WHEN p_lease_ms IS NULL THEN lease_expires_at ELSE p_now + p_lease_ms END
  WHERE id = p_run AND (status IN ('running', 'compensating') AND lease_owner = p_owner) IS TRUE;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  INSERT INTO ${s}.journal_entries (run_id, seq, kind, name, value, error, duration, wake_at, at)
  SELECT e.run_id, e.seq, e.kind, e.name, e.value -> 'v', e.error, e.duration, e.wake_at, e.at
  FROM jsonb_to_recordset(p_entries)
    AS e(run_id text, seq integer, kind text, name text, value jsonb, error jsonb, duration text, wake_at bigint, at bigint);
  RETURN true;
END $fn$;

CREATE FUNCTION ${s}.run_finish(p_run text, p_owner text, p_now bigint, p_status text, p_output jsonb, p_error jsonb)
RETURNS boolean LANGUAGE plpgsql VOLATILE SET enable_seqscan = off AS $fn$
BEGIN
  UPDATE ${s}.runs
  SET status = p_status, output = p_output, error = p_error, lease_owner = NULL, lease_expires_at = NULL, updated_at = p_now
  WHERE id = p_run AND (status IN ('running', 'compensating') AND lease_owner = p_owner) IS TRUE;
  RETURN FOUND;
END $fn$;
`,
};
