/** PostgreSQL side of CompensationStore: a fenced running → compensating. */
import { runError } from "../journal-rules.ts";
import type { BeginCompensationRequest } from "../compensation-types.ts";
import { type PgContext, q } from "./postgres-context.ts";
import { refusal } from "./postgres-runs.ts";

export async function beginCompensation(ctx: PgContext, req: BeginCompensationRequest): Promise<void> {
  const { rowCount } = await q(
    ctx.pool,
    `UPDATE ${ctx.s}.runs SET status = 'compensating', error = $4::jsonb, updated_at = $3
     WHERE id = $1 AND status = 'running' AND lease_owner = $2`,
    [req.runId, req.owner, req.now, JSON.stringify(runError(req.error))],
  );
  if (rowCount === 0) throw await refusal(ctx, req.runId, true);
}
