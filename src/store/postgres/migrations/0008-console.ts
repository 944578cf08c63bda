/** Migration 0008: the console tables and indexes. */
import type { Migration } from "./index.ts";

/**
 * The Console's tables and the indexes its listings seek:
 * - runs newest first, by status (all statuses = one seek per status, merged)
 *   and by parent (a run's children, the trace chain);
 * - instance heartbeats, one row per live app instance;
 * - the operator audit log, append-only.
 * Message listings reuse 0001's partial indexes (ready, inflight, dead,
 * delivered), so the hot queue table gets no new index to maintain.
 */
export const m0008: Migration = {
  id: 8,
  name: "console",
  sql: (s) => `
CREATE INDEX runs_page ON ${s}.runs (status, created_at, id COLLATE "C");
CREATE INDEX runs_children ON ${s}.runs (parent_run_id, created_at, id COLLATE "C") WHERE parent_run_id IS NOT NULL;

CREATE TABLE ${s}.instances (
  id text PRIMARY KEY,
  info jsonb NOT NULL,
  started_at bigint NOT NULL,
  seen_at bigint NOT NULL
);

CREATE TABLE ${s}.audit_log (
  id bigserial PRIMARY KEY,
  at bigint NOT NULL,
  actor text NOT NULL,
  action text NOT NULL,
  target text NOT NULL,
  detail jsonb NOT NULL
);
`,
};
