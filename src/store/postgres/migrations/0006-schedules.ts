/** Migration 0006: schedules and their fired slots. */
import type { Migration } from "./index.ts";

/**
 * Schedules (clock) and their fired slots. A fire is one statement: the
 * schedule row's UPDATE (fenced by version, pause, and last slot) feeds the
 * INSERT into schedule_fires (primary key (clock, slot)) which feeds the
 * INSERT of the fire's message — so a slot is recorded and its work enqueued
 * in one commit, and a second instance firing the same slot waits on the
 * schedule row, re-checks it, and writes nothing.
 */
export const m0006: Migration = {
  id: 6,
  name: "schedules",
  sql: (s) => `
CREATE TABLE ${s}.schedules (
  name text PRIMARY KEY,
  declared jsonb NOT NULL,
  override jsonb,
  overridable boolean NOT NULL,
  flow text NOT NULL,
  description text,
  paused boolean NOT NULL DEFAULT false,
  orphaned boolean NOT NULL DEFAULT false,
  version integer NOT NULL,
  anchor_at bigint NOT NULL,
  last_slot bigint,
  last_fired_at bigint,
  last_missed_runs integer NOT NULL DEFAULT 0,
  last_error jsonb,
  created_at bigint NOT NULL,
  updated_at bigint NOT NULL
);

CREATE TABLE ${s}.schedule_fires (
  clock text NOT NULL REFERENCES ${s}.schedules (name),
  slot bigint NOT NULL,
  fired_at bigint NOT NULL,
  missed_runs integer NOT NULL,
  message_id text NOT NULL,
  PRIMARY KEY (clock, slot)
);
-- pruneFires walks old fires by time.
CREATE INDEX schedule_fires_fired_at ON ${s}.schedule_fires (fired_at);
`,
};
