/** SQLite migration 0004: the reason a run was given back (RunRecord.held). */
import type { SqliteMigration } from "./migration.ts";

/** JSON `{code, message, since}` written by releaseRun's `hold`, NULL otherwise; read only by operator views. */
export const m0004: SqliteMigration = {
  id: 4,
  name: "run-hold",
  sql: `ALTER TABLE runs ADD COLUMN held TEXT;`,
};
