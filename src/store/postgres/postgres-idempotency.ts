/** The idempotency half of the postgres driver: a claim is one INSERT … ON CONFLICT in the common case (a new key). */
import type {
  ClaimIdempotencyRequest,
  IdempotencyClaim,
  IdempotencyRecord,
  StoredResponse,
} from "../idempotency-types.ts";
import { type PgContext, q } from "./postgres-context.ts";

interface Row {
  key: string;
  fingerprint: string;
  status: "running" | "done";
  response_status: number | null;
  response_body: string | null;
  run_id: string;
  locked_until: number;
  created_at: number;
  expires_at: number;
}

const toRecord = (r: Row): IdempotencyRecord => ({
  key: r.key,
  fingerprint: r.fingerprint,
  status: r.status,
  response: r.response_status === null ? null : { status: r.response_status, body: r.response_body },
  runId: r.run_id,
  lockedUntil: Number(r.locked_until),
  createdAt: Number(r.created_at),
  expiresAt: Number(r.expires_at),
});

/**
 * Three steps, each atomic on the row, tried in the order of their likelihood:
 * a new (or expired) key is claimed by the INSERT alone — one round trip, the
 * cost every keyed request pays; a retry then takes over a lapsed lock or
 * reads the record. The conditions are those of the memory driver.
 */
export async function claimIdempotencyKey(
  ctx: PgContext,
  req: ClaimIdempotencyRequest,
): Promise<IdempotencyClaim> {
  const claimed = await q(
    ctx.pool,
    `INSERT INTO ${ctx.s}.idempotency_keys AS k
       (key, fingerprint, status, response_status, response_body, run_id, locked_until, created_at, expires_at)
     VALUES ($1, $2, 'running', NULL, NULL, $3, $4::bigint + $5::bigint, $4, $4::bigint + $6::bigint)
     ON CONFLICT (key) DO UPDATE SET
       fingerprint = EXCLUDED.fingerprint, status = 'running', response_status = NULL, response_body = NULL,
       run_id = EXCLUDED.run_id, locked_until = EXCLUDED.locked_until, created_at = EXCLUDED.created_at,
       expires_at = EXCLUDED.expires_at
     WHERE k.expires_at <= $4
     RETURNING 1`,
    [req.key, req.fingerprint, req.runId, req.now, req.lockMs, req.windowMs],
  );
  if (claimed.rowCount > 0) return { kind: "claimed" };
  const taken = await q<Row>(
    ctx.pool,
    `UPDATE ${ctx.s}.idempotency_keys SET locked_until = $3::bigint + $4::bigint
     WHERE key = $1 AND fingerprint = $2 AND status = 'running' AND locked_until <= $3 AND expires_at > $3
     RETURNING *`,
    [req.key, req.fingerprint, req.now, req.lockMs],
  );
  if (taken.rows[0] !== undefined) return { kind: "takenOver", record: toRecord(taken.rows[0]) };
  const existing = await getIdempotencyKey(ctx, req.key);
  // Gone between the statements (released or pruned): claim again.
  if (existing === undefined) return claimIdempotencyKey(ctx, req);
  return { kind: "existing", record: existing };
}

export async function renewIdempotencyKey(
  ctx: PgContext,
  req: { key: string; fingerprint: string; now: number; lockMs: number },
): Promise<boolean> {
  const { rowCount } = await q(
    ctx.pool,
    `UPDATE ${ctx.s}.idempotency_keys SET locked_until = $3::bigint + $4::bigint
     WHERE key = $1 AND fingerprint = $2 AND status = 'running'`,
    [req.key, req.fingerprint, req.now, req.lockMs],
  );
  return rowCount > 0;
}

export async function completeIdempotencyKey(
  ctx: PgContext,
  req: { key: string; fingerprint: string; response: StoredResponse; now: number },
): Promise<void> {
  await q(
    ctx.pool,
    `UPDATE ${ctx.s}.idempotency_keys SET status = 'done', response_status = $3, response_body = $4
     WHERE key = $1 AND fingerprint = $2 AND status = 'running'`,
    [req.key, req.fingerprint, req.response.status, req.response.body],
  );
}

export async function releaseIdempotencyKey(
  ctx: PgContext,
  req: { key: string; fingerprint: string },
): Promise<void> {
  await q(
    ctx.pool,
    `DELETE FROM ${ctx.s}.idempotency_keys WHERE key = $1 AND fingerprint = $2 AND status = 'running'`,
    [req.key, req.fingerprint],
  );
}

export async function getIdempotencyKey(ctx: PgContext, key: string): Promise<IdempotencyRecord | undefined> {
  const { rows } = await q<Row>(ctx.pool, `SELECT * FROM ${ctx.s}.idempotency_keys WHERE key = $1`, [key]);
  return rows[0] === undefined ? undefined : toRecord(rows[0]);
}

export async function pruneIdempotencyKeys(ctx: PgContext, before: number): Promise<number> {
  const { rowCount } = await q(ctx.pool, `DELETE FROM ${ctx.s}.idempotency_keys WHERE expires_at <= $1`, [
    before,
  ]);
  return rowCount;
}
