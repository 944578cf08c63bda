/** Retention of finished durable runs on PostgreSQL: one bounded DELETE per batch (journals cascade). */
import { type PgContext, q } from "./postgres-context.ts";

/**
 * Hot only in the sense that it runs forever in the background: one short
 * statement per batch over the runs_finished partial index (0010), rows
 * locked by another transaction skipped, so it never waits on or blocks a
 * claim. Journal entries go with their run (ON DELETE CASCADE).
 */
export async function pruneRuns(ctx: PgContext, before: number, limit: number): Promise<number> {
  const { rowCount } = await q(
    ctx.pool,
    `DELETE FROM ${ctx.s}.runs WHERE id IN (
       SELECT id FROM ${ctx.s}.runs
       WHERE status IN ('completed', 'failed') AND updated_at < $1
       ORDER BY updated_at LIMIT $2 FOR UPDATE SKIP LOCKED)`,
    [before, Math.max(0, Math.floor(limit))],
  );
  return rowCount;
}
