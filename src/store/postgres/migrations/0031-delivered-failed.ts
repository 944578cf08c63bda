/** Migration 0031: delivered messages with a failure indexed by signal, so stats() counts failed broadcast copies exactly. */
import type { Migration } from "./migration.ts";

/**
 * stats() counts a signal's delivered messages that carry a failure (a broadcast copy whose handler
 * failed or was cut off; a once message delivered after a retry) from this partial index. Only such
 * rows enter it, so a delivery without failures costs one predicate check, no index entry. Before
 * it the Console read the newest 100 delivered copies of every broadcast flow on each refresh and
 * counted among those only. CREATE INDEX runs inside the migration transaction: on a large table it
 * holds writes to messages while it builds.
 */
export const m0031: Migration = {
  id: 31,
  name: "delivered-failed",
  // An index no statement of older code names: code at 28 or later runs on it as before.
  runsWith: 28,
  sql: (s) => `
CREATE INDEX IF NOT EXISTS messages_delivered_failed ON ${s}.messages (signal)
  WHERE status = 'delivered' AND failures <> '[]'::jsonb;
`,
};
