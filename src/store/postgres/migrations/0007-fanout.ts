/** Migration 0007: broadcast subscribers and live tapes (fan-out). */
import type { Migration } from "./index.ts";

/**
 * Fan-out (issue 15): which instance runs which flow of a broadcast signal, and
 * the retained tapes of live signals. Broadcast events themselves are once
 * messages (one copy per subscribed flow) in `messages`.
 */
export const m0007: Migration = {
  id: 7,
  name: "fanout",
  sql: (s) => `
-- One row per (signal, flow, instance), renewed by the instance's heartbeat.
-- An emitter makes a copy of each broadcast event for every (signal, flow)
-- with an unexpired row; a clean stop sets expires_at to the stop time.
CREATE TABLE ${s}.broadcast_subscribers (
  signal text NOT NULL,
  flow text NOT NULL,
  instance text NOT NULL,
  expires_at bigint NOT NULL,
  PRIMARY KEY (signal, flow, instance)
);
CREATE INDEX broadcast_subscribers_instance ON ${s}.broadcast_subscribers (instance);

-- One row per tape: the lock that orders its appends. Positions come from one
-- sequence taken while the row is locked, so on each tape they grow in commit
-- order, and a head row deleted with its last entry never lets a number repeat.
CREATE SEQUENCE ${s}.tape_positions;
CREATE TABLE ${s}.tape_heads (
  signal text NOT NULL,
  key text NOT NULL,
  head bigint NOT NULL,
  PRIMARY KEY (signal, key)
);

CREATE TABLE ${s}.tape_entries (
  signal text NOT NULL,
  key text NOT NULL,
  position bigint NOT NULL,
  id text NOT NULL UNIQUE,
  -- SQL NULL = undefined payload, 'null'::jsonb = null.
  payload jsonb,
  created_at bigint NOT NULL,
  PRIMARY KEY (signal, key, position)
);
-- Retention pruning walks the oldest entries of one signal.
CREATE INDEX tape_entries_age ON ${s}.tape_entries (signal, created_at);
`,
};
