/** Migration 0028: values handed back to user code (run input and output, step values, message and tape payloads) stored as json, which keeps their key order. */
import type { Migration } from "./migration.ts";

/** A quoted identifier as an SQL string literal. */
const lit = (quotedIdent: string): string => `'${quotedIdent.replaceAll("'", "''")}'`;

/**
 * jsonb stores an object's keys sorted (by length, then bytes), so a value read back iterated
 * `{zz, a}` as `a, zz`: on replay an `Object.keys` loop of steps asked for another step than the
 * one journaled (OKE1301), and a handler saw another key order than on the memory and file
 * drivers. json keeps the text as written (JSON.stringify's order). Reading json costs about
 * what jsonb does (the text is sent as stored); writing it is cheaper (validated, not converted).
 * No index or operator of the driver reads these columns; the few comparisons cast to jsonb.
 *
 * - runs.input, runs.output, journal_entries.value, messages.payload, tape_entries.payload become
 *   json. Rows written before keep the sorted order jsonb gave them. The ALTERs rewrite the four
 *   tables under an exclusive lock, inside the migration transaction.
 * - The journal functions take their entries as json (json_to_recordset keeps each value's text)
 *   and run_finish its output as json: new overloads. The jsonb ones of 0017/0021 stay, so an
 *   instance still on the old code keeps writing (its values sorted, as before) during a deploy.
 * - run_finish_batch casts its output to json instead of jsonb.
 * - claim_messages returns payload as json: same body and settings (read from the catalog, so
 *   the body stays the one 0026 installed, which the claim test compares with claimSql); a
 *   return type can only change by dropping and creating the function.
 */
export const m0028: Migration = {
  id: 28,
  name: "json-keeps-key-order",
  sql: (s) => `
ALTER TABLE ${s}.runs ALTER COLUMN input TYPE json USING input::json, ALTER COLUMN output TYPE json USING output::json;
ALTER TABLE ${s}.journal_entries ALTER COLUMN value TYPE json USING value::json;
ALTER TABLE ${s}.messages ALTER COLUMN payload TYPE json USING payload::json;
ALTER TABLE ${s}.tape_entries ALTER COLUMN payload TYPE json USING payload::json;

CREATE FUNCTION ${s}.journal_append(p_run text, p_owner text, p_now bigint, p_lease_ms bigint, p_entries json)
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
  FROM json_to_recordset(p_entries)
    AS e(run_id text, seq integer, kind text, name text, value json, error jsonb, duration text, wake_at bigint, at bigint);
  RETURN true;
END $fn$;

CREATE FUNCTION ${s}.journal_append_batch(p_runs text[], p_owners text[], p_now bigint[], p_lease_ms bigint[], p_entries json)
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
    FROM json_to_recordset(p_entries)
      AS e(run_id text, owner text, seq integer, kind text, name text, value json, error jsonb,
           duration text, wake_at bigint, at bigint)
    WHERE (e.run_id, e.owner) IN (SELECT id, lease_owner FROM run)
    RETURNING 1
  )
  SELECT coalesce(array_agg(id || ' ' || lease_owner), '{}') INTO fenced FROM run;
  RETURN fenced;
END $fn$;

CREATE FUNCTION ${s}.run_finish(p_run text, p_owner text, p_now bigint, p_status text, p_output json, p_error jsonb)
RETURNS boolean LANGUAGE plpgsql VOLATILE SET enable_seqscan = off AS $fn$
BEGIN
  UPDATE ${s}.runs
  SET status = p_status, output = p_output, error = p_error, lease_owner = NULL, lease_expires_at = NULL, updated_at = p_now
  WHERE id = p_run AND (status IN ('running', 'compensating') AND lease_owner = p_owner) IS TRUE;
  RETURN FOUND;
END $fn$;

CREATE OR REPLACE FUNCTION ${s}.run_finish_batch(p_runs text[], p_owners text[], p_now bigint[], p_status text[], p_output text[], p_error text[])
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
    SET status = i.status, output = i.output::json, error = i.error::jsonb,
        lease_owner = NULL, lease_expires_at = NULL, updated_at = i.now
    FROM input i
    WHERE r.id = ANY (p_runs) AND r.id = i.run_id
      AND (r.status IN ('running', 'compensating') AND r.lease_owner = i.owner) IS TRUE
    RETURNING r.id, i.owner
  )
  SELECT coalesce(array_agg(id || ' ' || owner), '{}') INTO fenced FROM run;
  RETURN fenced;
END $fn$;

DO $do$
DECLARE
  body text := (SELECT prosrc FROM pg_proc WHERE proname = 'claim_messages' AND pronamespace = ${lit(s)}::regnamespace);
BEGIN
  DROP FUNCTION ${s}.claim_messages(text, bigint, integer, text, bigint);
  EXECUTE format($create$
CREATE FUNCTION ${s}.claim_messages(p_signal text, p_now bigint, p_max integer, p_worker text, p_lease bigint)
RETURNS TABLE (id text, signal text, key text, payload json, parent_run_id text, attempts integer,
  created_at bigint, locked_by text, lease_expires_at bigint, seq bigint, ord1 bigint, ord2 bigint)
LANGUAGE plpgsql VOLATILE
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET enable_bitmapscan = off AS %L$create$, body);
END $do$;
`,
};
