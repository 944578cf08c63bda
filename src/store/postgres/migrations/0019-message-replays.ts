/** Migration 0019: a message's operator replay count (StoredMessage.replays). */
import type { Migration } from "./migration.ts";

/**
 * A durable consumer derives a replayed delivery's run id from it (`<id>.r<n>`). ADD COLUMN with a
 * constant default is a catalog change only (no table rewrite) on PostgreSQL 11 and later.
 */
export const m0019: Migration = {
  id: 19,
  name: "message-replays",
  sql: (s) => `
ALTER TABLE ${s}.messages ADD COLUMN IF NOT EXISTS replays integer NOT NULL DEFAULT 0;
`,
};
