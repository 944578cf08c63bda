/** Migration 0010: the partial index on finished runs for retention. */
import type { Migration } from "./index.ts";

/**
 * Retention of finished runs: pruneRuns walks completed and failed runs by
 * last update, oldest first, in bounded batches. The partial index holds only
 * finished runs, so live runs' claims never touch it.
 */
export const m0010: Migration = {
  id: 10,
  name: "run-retention",
  sql: (s) => `
CREATE INDEX runs_finished ON ${s}.runs (updated_at) WHERE status IN ('completed', 'failed');
`,
};
