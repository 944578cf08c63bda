/** The idempotency half of the postgres driver: a claim is one INSERT … ON CONFLICT in the common case (a new key), an answer one UPDATE; neither waits for its WAL flush. */
import type {
  ClaimIdempotencyRequest,
  CompleteIdempotencyRequest,
  CompleteOutcome,
  IdempotencyClaim,
  IdempotencyRecord,
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
 * The claim and the completion commit with `synchronous_commit = off` (set for their own
 * transaction only): both are visible to every instance at once, but their caller does not wait
 * for the WAL flush — a keyed request waits for no fsync of its own, only for those of the writes
 * its flow makes (which it waits for anyway). Why a PostgreSQL crash (or the machine's) cannot
 * make an answer wrong, point by point:
 * - WAL is written out in order, so any later synchronous commit writes the claim (and an earlier
 *   completion) out with it. Everything the request does durably comes after the claim (awaited
 *   before the flow starts): a durable flow's startRun, its journal and emits, a plain flow's
 *   emits. If any of them survived a crash, the claim survived too — as `running` with its run id.
 * - The completion may be lost while the answer was sent (within the WAL writer's delay, at most
 *   3 × wal_writer_delay, 600 ms by default). The claim then either survived: a retry after the
 *   lock lapsed takes over the same run id — a durable run continues (or answers from its result),
 *   a plain flow runs again and its emits, whose ids derive from the run id and their position
 *   (fx.ts nextId), are refused as duplicates — and the retry gets the answer the flow computes
 *   now (the same unless the flow's answer depends on time or randomness, e.g. fx.id()). Or the
 *   claim was lost too, and with it, by the ordering above, everything the request wrote: the
 *   retry claims the key afresh and runs the request as if the first attempt never arrived.
 *   Either way no store effect is doubled; what changes is that a client may see a recomputed
 *   answer after a crash instead of the first one.
 * - Visibility is not delayed, so two instances still never both win a key.
 * Writes the flow makes in another database are not ordered with the claim; for them a re-run is
 *   the flow's to make idempotent (fx.runId is the same on a takeover).
 * One more case: the server crashes before the claim is written out, comes back while the first
 * request's flow is still running in a live process, that flow then writes (an emit) on the
 * restarted server, and a retry arrived in between — the retry found no claim and ran the request
 * too (with another run id, so its emits are not deduplicated). A synchronous claim would have
 * answered that retry 409.
 * test/process/idempotency-pg-crash.test.ts crashes a real cluster between the claim, the answer
 * and the rest.
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

/** The common completion: the key's running record, live, with this fingerprint, becomes done. */
const completeOneSql = (s: string): string => `
UPDATE ${s}.idempotency_keys SET status = 'done', response_status = $3, response_body = $4
FROM ${ASYNC_COMMIT}
WHERE key = $1 AND fingerprint = $2 AND status = 'running' AND expires_at > $5`;

/** The same for many distinct keys in one statement; returns the keys it completed. */
const completeManySql = (s: string): string => `
UPDATE ${s}.idempotency_keys k SET status = 'done', response_status = u.status, response_body = u.body
FROM unnest($1::text[], $2::text[], $3::integer[], $4::text[], $5::bigint[])
  AS u(key, fingerprint, status, body, now), ${ASYNC_COMMIT}
WHERE k.key = u.key AND k.fingerprint = u.fingerprint AND k.status = 'running' AND k.expires_at > u.now
RETURNING k.key`;

/**
 * A completion whose key has no live record of its own (rare: the follow-up of one that matched
 * nothing). A missing or expired key gets a done record for a fresh window (restored); another
 * request's live record is left (superseded).
 */
const restoreSql = (s: string): string => `
INSERT INTO ${s}.idempotency_keys AS k
  (key, fingerprint, status, response_status, response_body, run_id, locked_until, created_at, expires_at)
SELECT $1, $2, 'done', $3, $4, $5, $6, $6, $6::bigint + $7::bigint
FROM ${ASYNC_COMMIT}
ON CONFLICT (key) DO UPDATE SET
  fingerprint = EXCLUDED.fingerprint, status = 'done', response_status = EXCLUDED.response_status,
  response_body = EXCLUDED.response_body, run_id = EXCLUDED.run_id, locked_until = EXCLUDED.locked_until,
  created_at = EXCLUDED.created_at, expires_at = EXCLUDED.expires_at
WHERE k.expires_at <= $6
RETURNING 1`;

const restore = async (ctx: PgContext, req: CompleteIdempotencyRequest): Promise<CompleteOutcome> => {
  const { rowCount } = await q(ctx.pool, restoreSql(ctx.s), [
    req.key,
    req.fingerprint,
    req.response.status,
    req.response.body,
    req.runId,
    req.now,
    req.windowMs,
  ]);
  return rowCount > 0 ? "restored" : "superseded";
};

/**
 * Group commit of completions: concurrent answers are stored by one UPDATE … FROM unnest (one
 * commit) instead of one each. Committed with `synchronous_commit = off`, like the claim: see
 * the comment on ASYNC_COMMIT for what a crash can do then.
 */
const completeGrouped: (ctx: PgContext, req: CompleteIdempotencyRequest) => Promise<CompleteOutcome> =
  groupCommit<CompleteIdempotencyRequest, CompleteOutcome>({
    what: "idempotency completions",
    maxInFlight: 2,
    // Not prepared: a prepared UPDATE by primary key can keep a generic sequential-scan plan made
    // while the table was a page or two (measured on runs, 6e848f3); the INSERT of the claim cannot.
    async single(ctx, req) {
      const values = [req.key, req.fingerprint, req.response.status, req.response.body, req.now];
      const { rowCount } = await q(ctx.pool, completeOneSql(ctx.s), values);
      return rowCount > 0 ? "completed" : restore(ctx, req);
    },
    async batch(ctx, reqs) {
      // One row per key: a key's holder completes it once; a repeat (same key twice) goes alone after.
      const first = new Map<string, CompleteIdempotencyRequest>();
      for (const r of reqs) if (!first.has(r.key)) first.set(r.key, r);
      const rs = [...first.values()];
      const { rows } = await q<{ key: string }>(ctx.pool, completeManySql(ctx.s), [
        rs.map((r) => r.key),
        rs.map((r) => r.fingerprint),
        rs.map((r) => r.response.status),
        rs.map((r) => r.response.body),
        rs.map((r) => r.now),
      ]);
      const done = new Set(rows.map((r) => r.key));
      return reqs.map((r) =>
        first.get(r.key) !== r
          ? { alone: (): Promise<CompleteOutcome> => completeGrouped(ctx, r) }
          : done.has(r.key)
            ? { value: "completed" as const }
            : { alone: (): Promise<CompleteOutcome> => restore(ctx, r) },
      );
    },
  });

export function completeIdempotencyKey(
  ctx: PgContext,
  req: CompleteIdempotencyRequest,
): Promise<CompleteOutcome> {
  return completeGrouped(ctx, req);
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
