/** The multi-row INSERT of an enqueue batch, in emit order. */
import type { ClaimedMessage, NewMessage, StoreEvent } from "../types.ts";
import { mapConflict, postgresStoreErrors } from "./postgres-errors.ts";
import { type PgContext, preparedName, q, type Queryable, unique, wakePayload } from "./postgres-context.ts";
import { jsonParam } from "./postgres-rows.ts";

/**
 * The multi-row INSERT of a batch: parallel arrays unnested in order, so `seq`
 * (bigserial) follows the array order = emit order. `p` is the number of the
 * first of six parameters (ids, signals, keys, payloads, parents, now); `where`
 * may gate the insert (the journal's fence). With `claimed`, two more arrays
 * ($p+6 holders, $p+7 lease expiries; NULL = not claimed) insert rows already
 * inflight at attempt 1 (claim at emit).
 */
export const insertMessagesSql = (s: string, p: number, where = "TRUE", claimed = false): string =>
  claimed
    ? `
  INSERT INTO ${s}.messages
    (id, signal, key, payload, parent_run_id, created_at, updated_at, status, locked_by, lease_expires_at, attempts)
  SELECT u.id, u.signal, u.key, u.payload, u.parent_run_id, $${p + 5}::bigint, $${p + 5}::bigint,
    CASE WHEN u.locked_by IS NULL THEN 'pending' ELSE 'inflight' END, u.locked_by, u.lease_expires_at,
    CASE WHEN u.locked_by IS NULL THEN 0 ELSE 1 END
  FROM unnest($${p}::text[], $${p + 1}::text[], $${p + 2}::text[], $${p + 3}::json[], $${p + 4}::text[],
              $${p + 6}::text[], $${p + 7}::bigint[])
    WITH ORDINALITY AS u(id, signal, key, payload, parent_run_id, locked_by, lease_expires_at, ord)
  WHERE ${where}
  ORDER BY u.ord`
    : `
  INSERT INTO ${s}.messages (id, signal, key, payload, parent_run_id, created_at, updated_at)
  SELECT u.id, u.signal, u.key, u.payload, u.parent_run_id, $${p + 5}::bigint, $${p + 5}::bigint
  FROM unnest($${p}::text[], $${p + 1}::text[], $${p + 2}::text[], $${p + 3}::json[], $${p + 4}::text[])
    WITH ORDINALITY AS u(id, signal, key, payload, parent_run_id, ord)
  WHERE ${where}
  ORDER BY u.ord`;

/**
 * One message as a one-row INSERT … VALUES, prepared by name (q()'s `name`):
 * the lone emit of S4 and S1. Measured on the shared 2-core machine, 900
 * sequential inserts each, interleaved: the unnest form unprepared p50 0.45 ms
 * (planning 0.08 + execution 0.12 ms server-side), this one prepared 0.15 ms.
 * Parameters: $1 id, $2 signal, $3 key, $4 payload, $5 parent, $6 now; claimed
 * adds $7 holder, $8 lease expiry. Nothing in it has a plan to go stale.
 */
const insertOneSql = (s: string, claimed: boolean): string =>
  claimed
    ? `INSERT INTO ${s}.messages
    (id, signal, key, payload, parent_run_id, created_at, updated_at, status, locked_by, lease_expires_at, attempts)
  VALUES ($1::text, $2::text, $3::text, $4::json, $5::text, $6::bigint, $6::bigint, 'inflight', $7::text, $8::bigint, 1)`
    : `INSERT INTO ${s}.messages (id, signal, key, payload, parent_run_id, created_at, updated_at)
  VALUES ($1::text, $2::text, $3::text, $4::json, $5::text, $6::bigint, $6::bigint)`;

export const insertMessagesParams = (messages: readonly NewMessage[], now: number): unknown[] => [
  messages.map((m) => m.id),
  messages.map((m) => m.signal),
  messages.map((m) => m.key),
  messages.map((m) => jsonParam(m.payload)),
  messages.map((m) => m.parentRunId),
  now,
];

/** Who holds a message written already claimed; `undefined` = an ordinary pending message. */
export interface EmitClaim {
  worker: string;
  leaseMs: number;
}

/** A message to write, and its claim when it is written already claimed. */
export interface Outgoing {
  message: NewMessage;
  claim?: EmitClaim | undefined;
}

/** The claimed message as the holder sees it after the commit (what RETURNING would give). */
export const claimedAtEmit = (m: NewMessage, now: number, c: EmitClaim): ClaimedMessage => ({
  id: m.id,
  signal: m.signal,
  key: m.key,
  payload: m.payload,
  parentRunId: m.parentRunId,
  attempts: 1,
  createdAt: now,
  lockedBy: c.worker,
  leaseExpiresAt: now + c.leaseMs,
});

export const enqueuedEvents = (messages: readonly NewMessage[]): StoreEvent[] =>
  unique(messages.map((m) => m.signal)).map((signal) => ({ kind: "enqueued", signal }));

function asQueryable(tx: unknown): Queryable {
  if (typeof tx === "object" && tx !== null && typeof (tx as { query?: unknown }).query === "function")
    return tx as Queryable;
  throw postgresStoreErrors.badTx();
}

/** A batch's INSERT (parameters from `p` on), its parameters, the messages to announce and the NOTIFY payload. */
export interface InsertPlan {
  insert: string;
  /** Some messages are written already claimed (the INSERT takes two more arrays). */
  claimed: boolean;
  params: unknown[];
  announced: NewMessage[];
  payload: string | null;
}

/** The messages of `batch` to announce (those not written already claimed) and their NOTIFY payload. */
function announcement(
  ctx: PgContext,
  batch: readonly Outgoing[],
  fromTx: boolean,
): { announced: NewMessage[]; payload: string | null } {
  const announced = batch.filter((o) => o.claim === undefined).map((o) => o.message);
  const payload =
    announced.length === 0 ? null : wakePayload(ctx, { e: unique(announced.map((m) => m.signal)) }, fromTx);
  return { announced, payload };
}

/**
 * The multi-row INSERT of `batch` (two or more messages, or one in a caller's tx) with its
 * parameters numbered from `p`, so another statement can carry it (postgres-write-lane.ts).
 */
export function insertPlan(
  ctx: PgContext,
  batch: readonly Outgoing[],
  now: number,
  p: number,
  fromTx = false,
): InsertPlan {
  const { announced, payload } = announcement(ctx, batch, fromTx);
  const claimed = announced.length < batch.length;
  const params = insertMessagesParams(
    batch.map((o) => o.message),
    now,
  );
  if (claimed)
    params.push(
      batch.map((o) => o.claim?.worker ?? null),
      batch.map((o) => (o.claim === undefined ? null : now + o.claim.leaseMs)),
    );
  return { insert: insertMessagesSql(ctx.s, p, "TRUE", claimed), claimed, params, announced, payload };
}

/**
 * One statement per call: the INSERT and its NOTIFY travel together, so the
 * NOTIFY is queued by the same transaction and fires only if it commits. With
 * `tx` the statement runs on the caller's client and we neither commit nor
 * tell local subscribers (the LISTEN echo does, after the caller's COMMIT).
 * Messages written already claimed are not announced: nobody else may take them.
 */
export async function enqueue(
  ctx: PgContext,
  batch: readonly Outgoing[],
  now: number,
  tx?: unknown,
): Promise<void> {
  const db = tx === undefined ? ctx.pool : asQueryable(tx);
  if (batch.length === 0) return;
  // A lone message on the store's own pool goes as a prepared one-row statement (a caller's tx
  // may be any client with query(); prepared statements are pg's).
  const one = batch.length === 1 && tx === undefined;
  let plan: InsertPlan;
  if (one) {
    const { message: m, claim } = batch[0]!;
    const params: unknown[] = [m.id, m.signal, m.key, jsonParam(m.payload), m.parentRunId, now];
    if (claim !== undefined) params.push(claim.worker, now + claim.leaseMs);
    plan = {
      insert: insertOneSql(ctx.s, claim !== undefined),
      claimed: claim !== undefined,
      params,
      ...announcement(ctx, batch, false),
    };
  } else plan = insertPlan(ctx, batch, now, 1, tx !== undefined);
  const { params, announced, payload } = plan;
  try {
    let sql = plan.insert;
    if (payload !== null) {
      const n = params.length;
      sql = `WITH ins AS (${plan.insert}) SELECT pg_notify($${n + 1}::text, $${n + 2}::text)`;
      params.push(ctx.channel, payload);
    }
    await q(db, sql, params, one ? preparedName("enq1", sql) : undefined);
  } catch (err) {
    throw mapConflict(err);
  }
  if (tx === undefined && announced.length > 0) ctx.emit(enqueuedEvents(announced));
}
