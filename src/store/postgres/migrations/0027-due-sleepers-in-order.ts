/** Migration 0027: the due sleepers' index carries the claim's whole order (flow, wake_at, id), so a claim of 32 reads 32 rows, not every due sleeper. */
import type { Migration } from "./migration.ts";

/**
 * claimDueRuns takes the earliest due runs, ties by id (`ORDER BY due_at, id COLLATE "C"`). Until
 * this migration the claim was one scan with an OR over sleepers and lapsed leases: PostgreSQL
 * read it as a BitmapOr, fetched every due sleeper of the instance's flows and sorted them all
 * under the row lock (no top-N sort below LockRows) to keep 32. With a backlog of due sleepers —
 * 100 000 runs whose timers fired while the fleet was down, or one schedule waking a cohort at the
 * same millisecond — every claim read and sorted the whole backlog: EXPLAIN ANALYZE with 1 000 000
 * parked and 100 000 due, 230 ms per claim (an external merge sort of 5.9 MB) and S13's resume at
 * 309-610 runs/s, falling as the backlog grew.
 *
 * The claim (claimDueSql, postgres-runs.ts) now walks each flow's due sleepers in order through
 * this index and stops after `max` (0.5 ms in the same EXPLAIN). The index needs `id` as its last
 * key for that: on (flow, wake_at) alone the id tie-break would sort every sleeper sharing a
 * wake_at, and a cohort due at one instant is exactly the backlog above. It replaces 0011's
 * runs_wake_flow, whose reads (nextWakeAt's per-flow minimum, the orphan scan's sleepers) it
 * serves as well. A run enters and leaves it only when it parks and wakes, as before.
 */
export const m0027: Migration = {
  id: 27,
  name: "due-sleepers-in-order",
  sql: (s) => `
CREATE INDEX runs_wake_flow_id ON ${s}.runs (flow, wake_at, id COLLATE "C") WHERE status = 'sleeping';
DROP INDEX IF EXISTS ${s}.runs_wake_flow;
`,
};
