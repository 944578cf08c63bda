/** Migration 0018: the group-commit statements of concurrent runs' appends and finishes as functions, planned once per connection on the runs primary key. */
import type { Migration } from "./migration.ts";

/**
 * What 0017 did for a lone append and a lone finish, for the shared statements
 * of runs in flight together (postgres-journal-batch.ts): sent unprepared,
 * each batch was parsed and planned (bench/pg-costs.ts s9-32 counted ~0.4
 * batch statements per run, 32 runs at a time). The same two guards keep the
 * cached plan on runs_pkey whatever the statistics it was made on:
 * `enable_seqscan = off`, and the fence as one `(…) IS TRUE` test no index
 * serves. A stale holder's row may share a batch with the current holder's:
 * the fence is per (run, owner), as before, and the functions return each
 * (run, owner) that got in.
 *
 * Measured: 32 runs at a time through app.invoke (600 per tree per round, 4
 * rounds interleaved with main at 0017, shared cluster, load 16–19):
 * PostgreSQL CPU per run 0.60 / 0.62 / 0.68 / 0.73 → 0.50 / 0.53 / 0.38 /
 * 0.57 ms, wall per run 3.50 / 2.65 / 1.82 / 2.42 → 3.23 / 1.88 / 1.39 /
 * 1.60 ms; Node CPU unchanged (0.41–0.74 vs 0.40–0.66 ms).
 */
export const m0018: Migration = {
  id: 18,
  name: "journal-batch-functions",
  sql: (s) => `
CREATE FUNCTION ${s}.journal_append_batch(p_runs text[], p_owners text[], p_now bigint[], p_lease_ms bigint[], p_entries jsonb)
RETURNS text[] LANGUAGE plpgsql VOLATILE SET enable_seqscan = off AS $fn$
DECLARE
  fenced text[];
BEGIN
  WITH input AS (
    SELECT * FROM unnest(p_runs, p_owners, p_now, p_lease_ms) AS x(run_id, owner, now, lease_ms)
  ),
  run AS (
    UPDATE ${s}.runs r
    SET updated_at = i.now,
        lease_expires_at = CASE WHEN i.lease_ms IS NULL THEN r.lease_expires_at ELSE i.now + i.lease_ms END
    FROM input i
    WHERE r.id = ANY (p_runs) AND r.id = i.run_id
      AND (r.status IN ('running', 'compensating') AND r.lease_owner = i.owner) IS TRUE
    RETURNING r.id, r.lease_owner
  ),
  entries AS (
    INSERT INTO ${s}.journal_entries (run_id, seq, kind, name, value, error, duration, wake_at, at)
    SELECT e.run_id, e.seq, e.kind, e.name, e.value -> 'v', e.error, e.duration, e.wake_at, e.at
    FROM jsonb_to_recordset(p_entries)
      AS e(run_id text, owner text, seq integer, kind text, name text, value jsonb, error jsonb,
           duration text, wake_at bigint, at bigint)
    WHERE (e.run_id, e.owner) IN (SELECT id, lease_owner FROM run)
    RETURNING 1
  )
  SELECT coalesce(array_agg(id || ' ' || lease_owner), '{}') INTO fenced FROM run;
  RETURN fenced;
END $fn$;

CREATE FUNCTION ${s}.run_finish_batch(p_runs text[], p_owners text[], p_now bigint[], p_status text[], p_output text[], p_error text[])
RETURNS text[] LANGUAGE plpgsql VOLATILE SET enable_seqscan = off AS $fn$
DECLARE
  fenced text[];
BEGIN
  WITH input AS (
    SELECT * FROM unnest(p_runs, p_owners, p_now, p_status, p_output, p_error)
      AS x(run_id, owner, now, status, output, error)
  ),
  run AS (
    UPDATE ${s}.runs r
    SET status = i.status, output = i.output::jsonb, error = i.error::jsonb,
        lease_owner = NULL, lease_expires_at = NULL, updated_at = i.now
    FROM input i
    WHERE r.id = ANY (p_runs) AND r.id = i.run_id
      AND (r.status IN ('running', 'compensating') AND r.lease_owner = i.owner) IS TRUE
    RETURNING r.id, i.owner
  )
  SELECT coalesce(array_agg(id || ' ' || owner), '{}') INTO fenced FROM run;
  RETURN fenced;
END $fn$;
`,
};
