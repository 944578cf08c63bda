/** The idempotency statements of the postgres driver: a claim is one INSERT … ON CONFLICT in the common case (a new key), an answer one UPDATE; alone, neither waits for its WAL flush (they travel in postgres-write-lane.ts). */
import type {
  ClaimIdempotencyRequest,
  CompleteIdempotencyRequest,
  CompleteOutcome,
  IdempotencyClaim,
  IdempotencyRecord,
} from "../idempotency-types.ts";
import { type PgContext, preparedName, q } from "./postgres-context.ts";

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
 *   3 × wal_writer_delay, 600 ms by default; or, a crash of this process, while it waits up to
 *   PARK_MS in postgres-write-lane.ts for another write to carry it). The claim then either survived: a retry after the
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

/**
 * Claims and completions of distinct keys in one statement: a row per key, `status` says which
 * (`running`: a claim, `done`: a completion). An INSERT … ON CONFLICT, so it has no plan to choose
 * (its conflict is found by the primary key's index, the arbiter) and is prepared, unlike an
 * UPDATE … FROM unnest (see q()). A claim row takes a new or expired key (as claimOneSql); a
 * completion row turns its key's live running record of the same fingerprint done (what the
 * memory driver's complete() does), or inserts its done record for a fresh window when the key
 * has no row at all (restored). A completion whose key holds an expired or another request's
 * record matches nothing here and goes on alone to restoreSql. RETURNING names the keys written;
 * `inserted` (no xmax on the new row: it was not an update) tells a restored completion from a
 * completed one — the conformance cases for both outcomes check it. Its nine arrays are numbered
 * from `p`; `asyncCommit` false leaves the commit synchronous, for a statement that carries emits
 * too (postgres-write-lane.ts).
 */
export const idempotencyRowsSql = (s: string, p = 1, asyncCommit = true): string => `
INSERT INTO ${s}.idempotency_keys AS k
  (key, fingerprint, status, response_status, response_body, run_id, locked_until, created_at, expires_at)
SELECT u.key, u.fingerprint, u.status, u.response_status, u.response_body, u.run_id, u.locked_until, u.now, u.expires_at
FROM unnest($${p}::text[], $${p + 1}::text[], $${p + 2}::text[], $${p + 3}::integer[], $${p + 4}::text[], $${p + 5}::text[], $${p + 6}::bigint[], $${p + 7}::bigint[], $${p + 8}::bigint[])
  AS u(key, fingerprint, status, response_status, response_body, run_id, locked_until, now, expires_at)${asyncCommit ? `, ${ASYNC_COMMIT}` : ""}
ON CONFLICT (key) DO UPDATE SET
  fingerprint = EXCLUDED.fingerprint, status = EXCLUDED.status,
  response_status = EXCLUDED.response_status, response_body = EXCLUDED.response_body,
  run_id = CASE WHEN EXCLUDED.status = 'running' THEN EXCLUDED.run_id ELSE k.run_id END,
  locked_until = CASE WHEN EXCLUDED.status = 'running' THEN EXCLUDED.locked_until ELSE k.locked_until END,
  created_at = CASE WHEN EXCLUDED.status = 'running' THEN EXCLUDED.created_at ELSE k.created_at END,
  expires_at = CASE WHEN EXCLUDED.status = 'running' THEN EXCLUDED.expires_at ELSE k.expires_at END
WHERE CASE WHEN EXCLUDED.status = 'running' THEN k.expires_at <= EXCLUDED.created_at
  ELSE k.fingerprint = EXCLUDED.fingerprint AND k.status = 'running' AND k.expires_at > EXCLUDED.created_at END
RETURNING k.key, k.xmax = 0 AS inserted`;

/**
 * The two prepared statements' texts and names per schema, built once: building the lane
 * statement's text and looking its name up by that text (a ~1 KB string hashed anew each time)
 * cost 6-8 µs per statement in a microbench (0.02 µs cached; loadavg ~20), 3 µs of preparedName
 * self time per keyed request in a --cpu-prof of the bench.
 */
const statements = new Map<string, { claimOne: Prepared; lane: Prepared }>();
interface Prepared {
  text: string;
  name: string;
}
function statementsFor(s: string): { claimOne: Prepared; lane: Prepared } {
  let st = statements.get(s);
  if (st === undefined) {
    const claimOne = claimOneSql(s);
    const lane = idempotencyRowsSql(s);
    st = {
      claimOne: { text: claimOne, name: preparedName("idem_claim", claimOne) },
      lane: { text: lane, name: preparedName("idem_lane", lane) },
    };
    statements.set(s, st);
  }
  return st;
}

/** What travels in the idempotency lane: a claim's first step or a completion. */
export type LaneItem = { claim: ClaimIdempotencyRequest } | { complete: CompleteIdempotencyRequest };
export type LaneOutcome = boolean | CompleteOutcome;
export const idempotencyKeyOfItem = (item: LaneItem): string =>
  "claim" in item ? item.claim.key : item.complete.key;

/**
 * One element of a text array literal, quoted: a backslash or a double quote escaped by one
 * pass, only when there is one (pg's own escape runs two replaces on every element).
 */
const NEEDS_ESCAPE = /["\\]/;
const quoted = (v: string): string => (NEEDS_ESCAPE.test(v) ? `"${v.replace(/["\\]/g, "\\$&")}"` : `"${v}"`);

/**
 * The lane statement's columns for `items` (distinct keys), in idempotencyRowsSql's parameter order, as
 * array literals built here rather than by pg (prepareValue, arrayString, escapeElement: two
 * regex replaces per element). In a --cpu-prof of bench/http-idempotency.ts split by its keyed
 * and unkeyed segments (128 connections, 3 runs each, loadavg 9-10), serialising the lane and the
 * lane's own code took 29.6 / 19.2 / 20.7 µs of sampled time per keyed request with pg's arrays,
 * 11.4 / 10.6 / 15.8 with these. Numbers are written as pg writes them (String), null as NULL.
 */
export function laneValues(items: readonly LaneItem[]): string[] {
  let keys = "";
  let fingerprints = "";
  let statuses = "";
  let responseStatuses = "";
  let bodies = "";
  let runIds = "";
  let locked = "";
  let nows = "";
  let expires = "";
  for (const [i, item] of items.entries()) {
    const sep = i === 0 ? "" : ",";
    if ("claim" in item) {
      const r = item.claim;
      keys += sep + quoted(r.key);
      fingerprints += sep + quoted(r.fingerprint);
      statuses += `${sep}running`;
      responseStatuses += `${sep}NULL`;
      bodies += `${sep}NULL`;
      runIds += sep + quoted(r.runId);
      locked += sep + String(r.now + r.lockMs);
      nows += sep + String(r.now);
      expires += sep + String(r.now + r.windowMs);
    } else {
      const r = item.complete;
      keys += sep + quoted(r.key);
      fingerprints += sep + quoted(r.fingerprint);
      statuses += `${sep}done`;
      responseStatuses += sep + String(r.response.status);
      bodies += sep + (r.response.body === null ? "NULL" : quoted(r.response.body));
      runIds += sep + quoted(r.runId);
      locked += sep + String(r.now);
      nows += sep + String(r.now);
      expires += sep + String(r.now + r.windowMs);
    }
  }
  return [keys, fingerprints, statuses, responseStatuses, bodies, runIds, locked, nows, expires].map(
    (c) => `{${c}}`,
  );
}

/** One item alone: a lone claim, a lone completion, or the second item of a key in a batch. */
export async function laneSingle(ctx: PgContext, item: LaneItem): Promise<LaneOutcome> {
  if ("claim" in item) {
    // Prepared: an INSERT of one row from no table, its conflict found by the primary key's
    // index (the arbiter), has no plan to choose (see q()).
    const req = item.claim;
    const { text, name } = statementsFor(ctx.s).claimOne;
    const values = [req.key, req.fingerprint, req.runId, req.now, req.lockMs, req.windowMs];
    return (await q(ctx.pool, text, values, name)).rowCount > 0;
  }
  const [outcome] = await sendLane(ctx, [item]);
  return outcome === undefined ? restore(ctx, item.complete) : outcome;
}

/**
 * Sends `items` (distinct keys) as one lane statement: per item, whether a claim claimed; a
 * completion's outcome, or undefined when it matched nothing (it goes on to restore).
 */
export async function sendLane(
  ctx: PgContext,
  items: readonly LaneItem[],
): Promise<(LaneOutcome | undefined)[]> {
  const { text, name } = statementsFor(ctx.s).lane;
  const { rows } = await q<LaneRow>(ctx.pool, text, laneValues(items), name);
  return laneOutcomes(items, rows);
}

/** A row of idempotencyRowsSql's RETURNING: a key written, and whether its row is new. */
export interface LaneRow {
  key: string | null;
  inserted: boolean | null;
}

/** Per item (distinct keys), from the keys the statement wrote: see sendLane. */
export function laneOutcomes(
  items: readonly LaneItem[],
  rows: readonly LaneRow[],
): (LaneOutcome | undefined)[] {
  const written = new Map<string | null, boolean | null>();
  for (const r of rows) written.set(r.key, r.inserted);
  return items.map((item) => {
    const inserted = written.get(idempotencyKeyOfItem(item));
    if ("claim" in item) return inserted !== undefined;
    if (inserted === undefined) return undefined;
    return inserted === true ? "restored" : "completed";
  });
}

/**
 * Three steps, each atomic on the row, tried in the order of their likelihood:
 * a new (or expired) key is claimed by the INSERT alone — one round trip, the
 * cost every keyed request pays, shared with other writes by `firstStep` (the write lane's);
 * a retry then takes over a lapsed lock or reads the record. The conditions are
 * those of the memory driver.
 */
export async function claimIdempotencyKey(
  ctx: PgContext,
  req: ClaimIdempotencyRequest,
  firstStep: (ctx: PgContext, req: ClaimIdempotencyRequest) => Promise<boolean>,
): Promise<IdempotencyClaim> {
  if (await firstStep(ctx, req)) return { kind: "claimed" };
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
  if (existing === undefined) return claimIdempotencyKey(ctx, req, firstStep);
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

export const restore = async (ctx: PgContext, req: CompleteIdempotencyRequest): Promise<CompleteOutcome> => {
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
