/** Migration 0005: the compensating run status. */
import type { Migration } from "./index.ts";

/**
 * The `compensating` run status: a failed run whose undos are running. It is
 * leased like `running`, so its lapsed leases get their own partial index next
 * to runs_lease (claimDueRuns, nextWakeAt, listOrphans probe both). Every
 * status existing rows can hold stays valid, so old runs read and replay as before.
 */
export const m0005: Migration = {
  id: 5,
  name: "compensating",
  sql: (s) => `
ALTER TABLE ${s}.runs DROP CONSTRAINT IF EXISTS runs_status_check;
ALTER TABLE ${s}.runs ADD CONSTRAINT runs_status_check
  CHECK (status IN ('running', 'sleeping', 'compensating', 'completed', 'failed'));
CREATE INDEX runs_compensating_lease ON ${s}.runs (lease_expires_at) WHERE status = 'compensating';
`,
};
