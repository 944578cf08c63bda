/** Store contract for the `compensating` status: a failed run whose undos are running. */
import type { RunError } from "./record-types.ts";

export interface BeginCompensationRequest {
  runId: string;
  owner: string;
  now: number;
  /** The failure being compensated; kept as the run's error, and the one it ends `failed` with. */
  error: RunError;
}

export interface CompensationStore {
  /**
   * `running` → `compensating`, fenced by the lease holder (JournalLeaseBusy
   * otherwise); the lease is kept. A compensating run is leased like a running
   * one: its writes are fenced the same way, and once its lease lapses
   * (a crash) claimDueRuns, listOrphans and nextWakeAt treat it like a running
   * run, so another instance finishes the compensation. `finish` ends it.
   */
  beginCompensation(req: BeginCompensationRequest): Promise<void>;
}
