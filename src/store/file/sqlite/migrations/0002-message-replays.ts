/** SQLite migration 0002: a message's operator replay count (StoredMessage.replays). */
import type { SqliteMigration } from "./migration.ts";

/** A durable consumer derives a replayed delivery's run id from it, so it must survive a restart. */
export const m0002: SqliteMigration = {
  id: 2,
  name: "message-replays",
  sql: `ALTER TABLE messages ADD COLUMN replays INTEGER NOT NULL DEFAULT 0;`,
};
