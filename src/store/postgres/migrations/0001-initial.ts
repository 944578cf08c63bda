/** Migration 0001: the queue and journal tables. */
import type { Migration } from "./index.ts";

/**
 * Queue + journal tables. Times are bigint epoch ms written from the caller's
 * `now`; SQL never reads the clock, so time travel works on this driver too.
 * Append-only: never edit a migration that shipped, add 0002-… instead.
 */
export const m0001: Migration = {
  id: 1,
  name: "initial",
  sql: (s) => `
CREATE TABLE ${s}.messages (
  id text PRIMARY KEY,
  signal text NOT NULL,
  key text,
  -- SQL NULL = undefined payload, 'null'::jsonb = null.
  payload jsonb,
  status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'inflight', 'delivered', 'dead')),
  attempts integer NOT NULL DEFAULT 0,
  failures jsonb NOT NULL DEFAULT '[]'::jsonb,
  locked_by text,
  lease_expires_at bigint,
  created_at bigint NOT NULL,
  updated_at bigint NOT NULL,
  parent_run_id text,
  -- Emit order: FIFO per key and oldest-first claims.
  seq bigserial NOT NULL
);

-- A queue table churns: every claim and settle leaves a dead row version and
-- dead entries at the front of the ready indexes, which each claim then steps
-- over until VACUUM removes them. Vacuum and analyze it far more often than
-- the defaults (20 % / 10 % of the table).
ALTER TABLE ${s}.messages SET (
  autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000,
  autovacuum_vacuum_insert_scale_factor = 0.05, autovacuum_analyze_scale_factor = 0.02
);

-- Ready predicate, split by partition kind: the claim walks each in seq order
-- and stops at its LIMIT (postgres-claim.ts).
CREATE INDEX messages_ready_unkeyed ON ${s}.messages (signal, seq) WHERE status = 'pending' AND key IS NULL;
CREATE INDEX messages_ready_keyed ON ${s}.messages (signal, seq) WHERE status = 'pending' AND key IS NOT NULL;
-- Inflight predicate: lazy reclaim (lease_expires_at <= now) and nextLeaseExpiry.
CREATE INDEX messages_inflight ON ${s}.messages (signal, lease_expires_at) WHERE status = 'inflight';
-- Keys held right now: the claim's busy-key set and the guard's "live lease in this key?" probe.
CREATE INDEX messages_key_inflight ON ${s}.messages (signal, key) WHERE status = 'inflight' AND key IS NOT NULL;
-- Head-of-key: "is there an older non-terminal message of this (signal, key)" is one probe.
CREATE INDEX messages_key_head ON ${s}.messages (signal, key, seq)
  WHERE key IS NOT NULL AND status IN ('pending', 'inflight');
-- Dead letters oldest first, and pruning of delivered rows.
CREATE INDEX messages_dead ON ${s}.messages (signal, created_at, seq) WHERE status = 'dead';
CREATE INDEX messages_delivered ON ${s}.messages (updated_at) WHERE status = 'delivered';

/*
 * The per-key guard of the claim (see postgres-claim.ts). VOLATILE on purpose:
 * in READ COMMITTED a volatile function takes a fresh snapshot for each query,
 * so after the advisory lock is ours we see every claim committed before it.
 */
CREATE FUNCTION ${s}.claim_key_free(p_signal text, p_key text, p_id text, p_now bigint)
RETURNS boolean LANGUAGE plpgsql VOLATILE COST 1000 AS $fn$
BEGIN
  IF NOT pg_try_advisory_xact_lock(hashtext(${lit(s)} || p_signal), hashtext(p_key)) THEN
    RETURN false;
  END IF;
  RETURN NOT EXISTS (
    SELECT 1 FROM ${s}.messages o
    WHERE o.signal = p_signal AND o.key = p_key AND o.status = 'inflight'
      AND o.lease_expires_at > p_now AND o.id <> p_id
  );
END
$fn$;

CREATE TABLE ${s}.runs (
  id text PRIMARY KEY,
  flow text NOT NULL,
  status text NOT NULL CHECK (status IN ('running', 'sleeping', 'completed', 'failed')),
  input jsonb,
  output jsonb,
  error jsonb,
  parent_run_id text,
  lease_owner text,
  lease_expires_at bigint,
  wake_at bigint,
  created_at bigint NOT NULL,
  updated_at bigint NOT NULL
);

-- Deadlines of claimDueRuns and nextWakeAt: a sleeper's wake_at (partial index
-- on sleeping runs), a running run's lease expiry (a dead instance's run).
CREATE INDEX runs_wake ON ${s}.runs (wake_at) WHERE status = 'sleeping';
CREATE INDEX runs_lease ON ${s}.runs (lease_expires_at) WHERE status = 'running';
CREATE INDEX runs_list ON ${s}.runs (status, flow, created_at);

-- One row per (run, seq): appending a step writes one row, never the whole journal.
CREATE TABLE ${s}.journal_entries (
  run_id text NOT NULL REFERENCES ${s}.runs (id) ON DELETE CASCADE,
  seq integer NOT NULL,
  kind text NOT NULL,
  name text NOT NULL,
  value jsonb,
  error jsonb,
  duration text,
  wake_at bigint,
  at bigint NOT NULL,
  PRIMARY KEY (run_id, seq)
);
`,
};

/** A quoted identifier as an SQL string literal (advisory-lock namespace). */
export function lit(quotedIdent: string): string {
  return `'${quotedIdent.replaceAll("'", "''")}.'`;
}
