/** SQLite migration 0003: a run's recovery count (RunRecord.recoveries). */
import type { SqliteMigration } from "./migration.ts";

/** Takeovers after a lapsed lease, counted by the take itself; the runtime ends a run past durable.maxRecoveries. */
export const m0003: SqliteMigration = {
  id: 3,
  name: "run-recoveries",
  sql: `ALTER TABLE runs ADD COLUMN recoveries INTEGER NOT NULL DEFAULT 0;`,
};
