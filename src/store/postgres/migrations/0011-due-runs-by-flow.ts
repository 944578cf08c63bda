/** Migration 0011: (flow, deadline) indexes, so an instance claims and arms on due runs of its own flows only. */
import type { Migration } from "./index.ts";

/**
 * claimDueRuns, nextWakeAt and listOrphans take the flows the calling
 * instance runs. These partial indexes lead with the flow, so a claim reads
 * only due runs of those flows (others' backlog is never scanned) and the next
 * wake time is one index probe per flow. They replace the flow-less deadline
 * indexes of 0001 and 0005: with both present the planner may walk the
 * flow-less one past every other flow's due run. A caller that passes no
 * filter (operator tools, an older app version during a rolling deploy) still
 * gets correct answers from these indexes, by scanning their partial ranges.
 */
export const m0011: Migration = {
  id: 11,
  name: "due-runs-by-flow",
  sql: (s) => `
DROP INDEX IF EXISTS ${s}.runs_wake;
DROP INDEX IF EXISTS ${s}.runs_lease;
DROP INDEX IF EXISTS ${s}.runs_compensating_lease;
CREATE INDEX runs_wake_flow ON ${s}.runs (flow, wake_at) WHERE status = 'sleeping';
CREATE INDEX runs_lease_flow ON ${s}.runs (flow, lease_expires_at) WHERE status = 'running';
CREATE INDEX runs_compensating_lease_flow ON ${s}.runs (flow, lease_expires_at) WHERE status = 'compensating';
`,
};
