/** The retention half of the Store contract: finished durable runs and their journals are deleted after a while. */

export interface RunRetentionStore {
  /**
   * Deletes at most `limit` runs that are `completed` or `failed` and were last
   * updated strictly before `before`, with their journals; returns how many.
   * Live runs (running, sleeping, compensating) are never touched. Callers
   * loop in batches until fewer than `limit` come back, so one call never
   * holds locks a claim waits on for long.
   */
  pruneRuns(before: number, limit: number): Promise<number>;
}
