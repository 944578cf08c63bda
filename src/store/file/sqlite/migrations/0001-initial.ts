/** SQLite migration 0001: every table and index of the file driver. */
import type { SqliteMigration } from "./migration.ts";

/**
 * Times are epoch ms from the caller's `now` (SQL never reads the clock). JSON
 * values are TEXT; SQL NULL is `undefined`, the text 'null' is `null`. Each
 * index names the call it serves.
 */
export const m0001: SqliteMigration = {
  id: 1,
  name: "initial",
  sql: `
-- Counters that must never go back (tape positions).
CREATE TABLE meta (k TEXT PRIMARY KEY, v INTEGER NOT NULL) WITHOUT ROWID;

-- seq: emit order (AUTOINCREMENT: never reused after a prune). ready = 1: claimable now — pending,
-- and unkeyed or the head of a key with nothing inflight; kept by every write that touches a key.
CREATE TABLE messages (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  signal TEXT NOT NULL,
  key TEXT,
  payload TEXT,
  parent_run_id TEXT,
  status TEXT NOT NULL,
  ready INTEGER NOT NULL DEFAULT 0,
  attempts INTEGER NOT NULL DEFAULT 0,
  failures TEXT NOT NULL DEFAULT '[]',
  locked_by TEXT,
  lease_expires_at INTEGER,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
);
-- claim: the ready messages of a signal in emit order.
CREATE INDEX messages_ready ON messages (signal, seq) WHERE ready = 1;
-- claim's lazy reclaim and nextLeaseExpiry.
CREATE INDEX messages_inflight ON messages (signal, lease_expires_at, seq) WHERE status = 'inflight';
-- per-key FIFO: a key's live messages in emit order (its head, "is anything inflight").
CREATE INDEX messages_key_live ON messages (signal, key, seq)
  WHERE key IS NOT NULL AND status IN ('pending', 'inflight');
-- stats' oldest pending age.
CREATE INDEX messages_pending_age ON messages (signal, created_at, seq) WHERE status = 'pending';
-- deadLetters, replay/discard "all", the Console's dead listing.
CREATE INDEX messages_dead ON messages (signal, created_at, seq) WHERE status = 'dead';
-- pruneDelivered and throughput.
CREATE INDEX messages_delivered ON messages (updated_at, seq) WHERE status = 'delivered';
-- the Console's listings by (signal, status) and stats' counts.
CREATE INDEX messages_listing ON messages (signal, status, seq);
CREATE INDEX messages_delivered_listing ON messages (signal, updated_at, seq) WHERE status = 'delivered';

-- deadline: when the run next needs an owner (a sleeper's wake_at, a leased run's lease expiry),
-- NULL when never. status_seq: order of entering the current status (orphan scan, retention).
CREATE TABLE runs (
  id TEXT PRIMARY KEY,
  flow TEXT NOT NULL,
  status TEXT NOT NULL,
  input TEXT,
  output TEXT,
  error TEXT,
  parent_run_id TEXT,
  lease_owner TEXT,
  lease_expires_at INTEGER,
  wake_at INTEGER,
  deadline INTEGER,
  status_seq INTEGER NOT NULL,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
) WITHOUT ROWID;
-- claimDueRuns / nextWakeAt, filtered by flow and not.
CREATE INDEX runs_due_by_flow ON runs (flow, deadline, id) WHERE deadline IS NOT NULL;
CREATE INDEX runs_due ON runs (deadline, id) WHERE deadline IS NOT NULL;
-- listOrphans, pruneRuns.
CREATE INDEX runs_status ON runs (status, status_seq);
-- listRuns and the Console's run pages (newest first), by status, flow, parent.
CREATE INDEX runs_created ON runs (created_at, id);
CREATE INDEX runs_status_created ON runs (status, created_at, id);
CREATE INDEX runs_flow_created ON runs (flow, created_at, id);
CREATE INDEX runs_parent ON runs (parent_run_id, created_at, id) WHERE parent_run_id IS NOT NULL;

-- name: a sleep's label, any other entry's name.
CREATE TABLE journal_entries (
  run_id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  kind TEXT NOT NULL,
  name TEXT NOT NULL,
  value TEXT,
  error TEXT,
  duration TEXT,
  wake_at INTEGER,
  at INTEGER NOT NULL,
  PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;

CREATE TABLE instances (
  id TEXT PRIMARY KEY,
  started_at INTEGER NOT NULL,
  seen_at INTEGER NOT NULL,
  doc TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE audit (id INTEGER PRIMARY KEY, doc TEXT NOT NULL);

CREATE TABLE schedules (name TEXT PRIMARY KEY, last_slot INTEGER, doc TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE schedule_fires (
  name TEXT NOT NULL,
  slot INTEGER NOT NULL,
  fired_at INTEGER NOT NULL,
  missed_runs INTEGER NOT NULL,
  message_id TEXT NOT NULL,
  PRIMARY KEY (name, slot)
) WITHOUT ROWID;
-- pruneFires.
CREATE INDEX schedule_fires_fired ON schedule_fires (fired_at);

CREATE TABLE idempotency_keys (
  key TEXT PRIMARY KEY,
  fingerprint TEXT NOT NULL,
  status TEXT NOT NULL,
  response TEXT,
  run_id TEXT NOT NULL,
  locked_until INTEGER NOT NULL,
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL
) WITHOUT ROWID;
-- pruneIdempotencyKeys.
CREATE INDEX idempotency_keys_expires ON idempotency_keys (expires_at);

-- One tape per (signal, key), in position order; an id appears once per tape.
CREATE TABLE tape_entries (
  signal TEXT NOT NULL,
  key TEXT NOT NULL,
  position INTEGER NOT NULL,
  id TEXT NOT NULL,
  payload TEXT,
  created_at INTEGER NOT NULL,
  PRIMARY KEY (signal, key, position)
) WITHOUT ROWID;
CREATE UNIQUE INDEX tape_entries_id ON tape_entries (signal, key, id);
`,
};
