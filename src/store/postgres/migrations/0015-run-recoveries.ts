/** Migration 0015: a run's recovery count (RunRecord.recoveries). */
import type { Migration } from "./migration.ts";

/**
 * Takeovers of a run after its lease lapsed, counted by the UPDATE that takes it; the runtime ends a
 * run past `durable.maxRecoveries`. ADD COLUMN with a constant default is a catalog change only (no
 * table rewrite) on PostgreSQL 11 and later.
 */
export const m0015: Migration = {
  id: 15,
  name: "run-recoveries",
  sql: (s) => `
ALTER TABLE ${s}.runs ADD COLUMN IF NOT EXISTS recoveries integer NOT NULL DEFAULT 0;
`,
};
