/** SQLite migration 0005: delivered messages with a failure indexed by signal, so their count (failed broadcast copies) is exact and cheap. */
import type { SqliteMigration } from "./migration.ts";

/**
 * stats() counts a signal's delivered messages that carry a failure from this index alone. Only such
 * rows enter it (a broadcast copy whose handler failed or was cut off, a once message delivered after
 * a retry), so a healthy queue's deliveries add nothing to it.
 */
export const m0005: SqliteMigration = {
  id: 5,
  name: "delivered-failed",
  // An index no statement of older code names: code at 4 runs on it as before.
  runsWith: 4,
  sql: `CREATE INDEX messages_delivered_failed ON messages (signal) WHERE status = 'delivered' AND failures <> '[]';`,
};
