/** The idempotency half of the postgres driver: a claim is one INSERT … ON CONFLICT in the common case (a new key). */
import type {
  ClaimIdempotencyRequest,
  IdempotencyClaim,
  IdempotencyRecord,
  StoredResponse,
} from "../idempotency-types.ts";
import { type PgContext, preparedName, q } from "./postgres-context.ts";
import { groupCommit } from "./postgres-group-commit.ts";

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
 * The claim commits with `synchronous_commit = off` (set for its own transaction only): it is
 * visible to every instance at once, but its caller does not wait for the WAL flush — one fsync'd
 * commit per keyed request instead of two. The completion stays synchronous. Why a PostgreSQL
 * crash (or the machine's) cannot make this answer wrong, point by point:
 * - WAL is written out in order, so any later synchronous commit writes the claim out with it.
 *   Everything the request does durably comes after the claim (the claim is awaited before the
 *   flow starts): a durable flow's startRun, its journal and emits, a plain flow's emit, the
 *   completion. If any of them survived a crash, the claim survived too — as `running` with its
 *   run id, so a retry after the lock lapsed takes over that same run (a journaled emit is not
 *   repeated) or is answered by the completion.
 * - A crash before anything durable followed loses the claim together with nothing: there is no
 *   run, no message and no stored answer, and no response was sent yet (it waits for the
 *   synchronous completion). A retry claims the key afresh and runs the request — the same as if
 *   the first attempt had never reached the server. A retry that saw the claim before the crash
 *   got 409, which promises nothing.
 * - Visibility is not delayed, so two instances still never both win a key.
 * Writes the flow makes in another database are not ordered with the claim; for them nothing
 * changes either: a plain flow whose request did not complete is run again on takeover anyway.
 * The one case that is new: the server crashes before the claim is written out (the WAL writer
 * writes async commits within 3 × wal_writer_delay, 600 ms by default), comes back while the
 * first request's flow is still running in a live process, that flow then writes (an emit) on
 * the restarted server, and a retry arrived in between — the retry found no claim and ran the
 * request too. A synchronous claim would have answered that retry 409.
 * test/process/idempotency-pg-crash.test.ts crashes a real cluster between the claim and the rest.
 */
const ASYNC_COMMIT = "(SELECT set_config('synchronous_commit', 'off', true)) AS async_commit";

/** The claim's first step for one key: a new (or expired) key is claimed by the INSERT alone. */
const claimOneSql = (s: string): string => `
INSERT INTO ${s}.idempotency_keys AS k
  (key, fingerprint, status, response_status, response_body, run_id, locked_until, created_at, expires_at)
SELECT $1, $2, 'running', NULL, NULL, $3, $4::bigint + $5::bigint, $4, $4::bigint + $6::bigint
FROM ${ASYNC_COMMIT}
ON CONFLICT (key) DO UPDATE SET
  fingerprint = EXCLUDED.fingerprint, status = 'running', response_status = NULL, response_body = NULL,
  run_id = EXCLUDED.run_id, locked_until = EXCLUDED.locked_until, created_at = EXCLUDED.created_at,
  expires_at = EXCLUDED.expires_at
WHERE k.expires_at <= $4
RETURNING 1`;

/** The same for many distinct keys in one statement; returns the keys it claimed. */
const claimManySql = (s: string): string => `
INSERT INTO ${s}.idempotency_keys AS k
  (key, fingerprint, status, response_status, response_body, run_id, locked_until, created_at, expires_at)
SELECT u.key, u.fingerprint, 'running', NULL, NULL, u.run_id, u.now + u.lock_ms, u.now, u.now + u.window_ms
FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::bigint[])
  AS u(key, fingerprint, run_id, now, lock_ms, window_ms), ${ASYNC_COMMIT}
ON CONFLICT (key) DO UPDATE SET
  fingerprint = EXCLUDED.fingerprint, status = 'running', response_status = NULL, response_body = NULL,
  run_id = EXCLUDED.run_id, locked_until = EXCLUDED.locked_until, created_at = EXCLUDED.created_at,
  expires_at = EXCLUDED.expires_at
WHERE k.expires_at <= EXCLUDED.created_at
RETURNING k.key`;

/**
 * Group commit of the claims' first step: concurrent keyed requests share one
 * INSERT … ON CONFLICT (one commit) instead of one each; a lone request goes
 * out at once. Two requests with one key in a batch: the first goes in the
 * statement, the second takes the follow-up path alone after it (it finds
 * the first's claim: 409 or the stored answer), as if they had come in turn.
 */
const claimGrouped = groupCommit<ClaimIdempotencyRequest, boolean>({
  what: "idempotency claims",
  maxInFlight: 2,
  // Prepared: an INSERT of one row from no table, its conflict found by the primary key's
  // index (the arbiter), has no plan to choose (see q()).
  single: async (ctx, req) => {
    const text = claimOneSql(ctx.s);
    const values = [req.key, req.fingerprint, req.runId, req.now, req.lockMs, req.windowMs];
    return (await q(ctx.pool, text, values, preparedName("idem_claim", text))).rowCount > 0;
  },
  async batch(ctx, reqs) {
    const first = new Map<string, ClaimIdempotencyRequest>();
    for (const r of reqs) if (!first.has(r.key)) first.set(r.key, r);
    const rs = [...first.values()];
    const { rows } = await q<{ key: string }>(ctx.pool, claimManySql(ctx.s), [
      rs.map((r) => r.key),
      rs.map((r) => r.fingerprint),
      rs.map((r) => r.runId),
      rs.map((r) => r.now),
      rs.map((r) => r.lockMs),
      rs.map((r) => r.windowMs),
    ]);
    const claimed = new Set(rows.map((r) => r.key));
    return reqs.map((r) =>
      first.get(r.key) === r ? { value: claimed.has(r.key) } : { alone: () => Promise.resolve(false) },
    );
  },
});

/**
 * Three steps, each atomic on the row, tried in the order of their likelihood:
 * a new (or expired) key is claimed by the INSERT alone — one round trip, the
 * cost every keyed request pays, shared by concurrent requests (claimGrouped);
 * a retry then takes over a lapsed lock or reads the record. The conditions are
 * those of the memory driver.
 */
export async function claimIdempotencyKey(
  ctx: PgContext,
  req: ClaimIdempotencyRequest,
): Promise<IdempotencyClaim> {
  if (await claimGrouped(ctx, req)) return { kind: "claimed" };
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

interface CompleteRequest {
  key: string;
  fingerprint: string;
  response: StoredResponse;
  now: number;
}

/** Group commit of completions: concurrent answers are stored by one UPDATE … FROM unnest (one commit). */
const completeGrouped: (ctx: PgContext, req: CompleteRequest) => Promise<undefined> = groupCommit<
  CompleteRequest,
  undefined
>({
  what: "idempotency completions",
  maxInFlight: 2,
  // Not prepared: a prepared UPDATE by primary key can keep a generic sequential-scan plan made
  // while the table was a page or two (measured on runs, 6e848f3); the INSERT of the claim cannot.
  async single(ctx, req) {
    const text = `UPDATE ${ctx.s}.idempotency_keys SET status = 'done', response_status = $3, response_body = $4
       WHERE key = $1 AND fingerprint = $2 AND status = 'running'`;
    const values = [req.key, req.fingerprint, req.response.status, req.response.body];
    await q(ctx.pool, text, values);
    return undefined;
  },
  async batch(ctx, reqs) {
    // One row per key: a key's holder completes it once; a repeat (same key twice) goes alone after.
    const first = new Map<string, CompleteRequest>();
    for (const r of reqs) if (!first.has(r.key)) first.set(r.key, r);
    const rs = [...first.values()];
    await q(
      ctx.pool,
      `UPDATE ${ctx.s}.idempotency_keys k SET status = 'done', response_status = u.status, response_body = u.body
       FROM unnest($1::text[], $2::text[], $3::integer[], $4::text[]) AS u(key, fingerprint, status, body)
       WHERE k.key = u.key AND k.fingerprint = u.fingerprint AND k.status = 'running'`,
      [
        rs.map((r) => r.key),
        rs.map((r) => r.fingerprint),
        rs.map((r) => r.response.status),
        rs.map((r) => r.response.body),
      ],
    );
    return reqs.map((r) =>
      first.get(r.key) === r
        ? { value: undefined }
        : { alone: (): Promise<undefined> => completeGrouped(ctx, r) },
    );
  },
});

export async function completeIdempotencyKey(ctx: PgContext, req: CompleteRequest): Promise<void> {
  await completeGrouped(ctx, req);
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
