/** Migration 0022: drops 0021's (flow) indexes of running and compensating runs — runs_list already serves those ranges, so a run's start no longer writes an index entry that no plan reads. */
import type { Migration } from "./migration.ts";

/**
 * 0021 replaced the (flow, lease_expires_at) indexes with (flow) ones so that
 * an append is a HOT update. EXPLAIN ANALYZE afterwards (private cluster,
 * 200 000 finished runs, 64 running, 100 sleeping, analysed) showed the
 * planner reading the running range from runs_list (status, flow,
 * created_at) for nextWakeAt's per-flow probe and from runs_page (status, …)
 * in the claim's BitmapOr, never from runs_running_flow — which still took an
 * entry at every start and every take of a run. Measured, one connection,
 * 500 runs a round, 6 rounds taking turns (load ~14): the start's INSERT 71 →
 * 52 µs of execution and 507 → 435 bytes of WAL. The claim's compensating
 * branch reads runs_list / runs_page the same way.
 */
export const m0022: Migration = {
  id: 22,
  name: "running-by-list",
  sql: (s) => `
DROP INDEX IF EXISTS ${s}.runs_running_flow;
DROP INDEX IF EXISTS ${s}.runs_compensating_flow;
`,
};
