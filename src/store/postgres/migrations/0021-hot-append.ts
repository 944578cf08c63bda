/** Migration 0021: a journal append rewrites its run row as a HOT update (no index entry), by writing only columns no index reads. */
import type { Migration } from "./migration.ts";

/**
 * An append (and a lease renewal) sets the run's last-write time and renews
 * its lease. Both columns were indexed — updated_at by runs_finished (0010),
 * lease_expires_at by the (flow, lease_expires_at) indexes of 0011 — so every
 * append was a non-HOT update: a new entry in runs_pkey, runs_list, runs_page
 * and runs_lease_flow on top of the heap tuple, about 20 index entries per
 * 3-step run. PostgreSQL 15 updates a row in place on its page (HOT) only when
 * no indexed column (key or predicate) changes value.
 *
 * - `stepped_at` holds the time of the last append or renewal; updated_at keeps
 *   the time of the last status or lease-holder change, which is what
 *   retention's runs_finished orders on (a finished run's updated_at is its
 *   finish, never before a step). The driver reports `updatedAt` as the later
 *   of the two, so what operators see is unchanged.
 * - The lapsed-lease indexes key on flow alone: a claim or nextWakeAt reads the
 *   running (compensating) runs of its flows and tests their lease on the row.
 *   Those are the runs in flight — bounded by the fleet's durable.concurrency —
 *   not the table; sleepers (runs_wake_flow) and finished runs are not in them.
 *
 * The functions keep 0017's and 0018's plan guards (`SET enable_seqscan = off`,
 * the fence as one `(…) IS TRUE`), so their UPDATEs stay on runs_pkey.
 */
export const m0021: Migration = {
  id: 21,
  name: "hot-append",
  sql: (s) => `
ALTER TABLE ${s}.runs ADD COLUMN stepped_at bigint;

DROP INDEX IF EXISTS ${s}.runs_lease_flow;
DROP INDEX IF EXISTS ${s}.runs_compensating_lease_flow;
CREATE INDEX runs_running_flow ON ${s}.runs (flow) WHERE status = 'running';
CREATE INDEX runs_compensating_flow ON ${s}.runs (flow) WHERE status = 'compensating';

CREATE OR REPLACE FUNCTION ${s}.journal_append(p_run text, p_owner text, p_now bigint, p_lease_ms bigint, p_entries jsonb)
RETURNS boolean LANGUAGE plpgsql VOLATILE SET enable_seqscan = off AS $fn$
BEGIN
  UPDATE ${s}.runs
  SET stepped_at = p_now,
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

CREATE OR REPLACE FUNCTION ${s}.journal_append_batch(p_runs text[], p_owners text[], p_now bigint[], p_lease_ms bigint[], p_entries jsonb)
RETURNS text[] LANGUAGE plpgsql VOLATILE SET enable_seqscan = off AS $fn$
DECLARE
  fenced text[];
BEGIN
  WITH input AS (
    SELECT * FROM unnest(p_runs, p_owners, p_now, p_lease_ms) AS x(run_id, owner, now, lease_ms)
  ),
  run AS (
    UPDATE ${s}.runs r
    SET stepped_at = i.now,
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
`,
};
