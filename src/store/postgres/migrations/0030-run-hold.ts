/** Migration 0030: the reason a run was given back (RunRecord.held), for operators. */
import type { Migration } from "./migration.ts";

/**
 * Written only by releaseRun (`hold`), read only by the operator views' `SELECT *`: no hot path
 * reads or writes it, and a nullable column without a default is a catalog change (no rewrite).
 */
export const m0030: Migration = {
  id: 30,
  name: "run-hold",
  // Code at 28 or later never names the column (its prepared statements list their columns:
  // runColumns), so it runs as before; its own releases leave the last note in place, shown until
  // the run is held. 28, not 29: 0029 leaves code at 28 working, and so does this.
  runsWith: 28,
  sql: (s) => `
ALTER TABLE ${s}.runs ADD COLUMN IF NOT EXISTS held jsonb;
`,
};
