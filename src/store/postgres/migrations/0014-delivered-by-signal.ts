/** Migration 0014: delivered messages indexed by signal, so the Console's counts are index-only scans. */
import type { Migration } from "./index.ts";

/**
 * stats() counts each status of one signal from a partial index: pending from
 * the two ready indexes, inflight and dead from theirs, delivered from this
 * one. Without it the delivered count read every delivered row of the table
 * (the only delivered index leads with updated_at, for pruning). The cost is
 * one more index entry per delivery (a short text key), removed by the prune.
 * CREATE INDEX runs inside the migration transaction: on a large existing
 * table it holds writes to messages while it builds.
 */
export const m0014: Migration = {
  id: 14,
  name: "delivered-by-signal",
  sql: (s) => `
CREATE INDEX IF NOT EXISTS messages_delivered_signal ON ${s}.messages (signal) WHERE status = 'delivered';
`,
};
