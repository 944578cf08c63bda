import type { NewMessage, StoreEvent } from "../types.ts";
import { mapConflict, postgresStoreErrors } from "./postgres-errors.ts";
import { type PgContext, q, type Queryable, unique, wakePayload } from "./postgres-context.ts";
import { jsonParam } from "./postgres-rows.ts";

/**
 * The multi-row INSERT of a batch: five parallel arrays unnested in order, so
 * `seq` (bigserial) follows the array order = emit order. `p` is the number of
 * the first of six parameters (ids, signals, keys, payloads, parents, now);
 * `where` may gate the insert (the journal's fence).
 */
export const insertMessagesSql = (s: string, p: number, where = "TRUE"): string => `
  INSERT INTO ${s}.messages (id, signal, key, payload, parent_run_id, created_at, updated_at)
  SELECT u.id, u.signal, u.key, u.payload, u.parent_run_id, $${p + 5}::bigint, $${p + 5}::bigint
  FROM unnest($${p}::text[], $${p + 1}::text[], $${p + 2}::text[], $${p + 3}::jsonb[], $${p + 4}::text[])
    WITH ORDINALITY AS u(id, signal, key, payload, parent_run_id, ord)
  WHERE ${where}
  ORDER BY u.ord`;

export const insertMessagesParams = (messages: readonly NewMessage[], now: number): unknown[] => [
  messages.map((m) => m.id),
  messages.map((m) => m.signal),
  messages.map((m) => m.key),
  messages.map((m) => jsonParam(m.payload)),
  messages.map((m) => m.parentRunId),
  now,
];

export const enqueuedEvents = (messages: readonly NewMessage[]): StoreEvent[] =>
  unique(messages.map((m) => m.signal)).map((signal) => ({ kind: "enqueued", signal }));

function asQueryable(tx: unknown): Queryable {
  if (typeof tx === "object" && tx !== null && typeof (tx as { query?: unknown }).query === "function")
    return tx as Queryable;
  throw postgresStoreErrors.badTx();
}

/**
 * One statement per call: the INSERT and its NOTIFY travel together, so the
 * NOTIFY is queued by the same transaction and fires only if it commits. With
 * `tx` the statement runs on the caller's client and we neither commit nor
 * tell local subscribers (the LISTEN echo does, after the caller's COMMIT).
 */
export async function enqueue(
  ctx: PgContext,
  messages: readonly NewMessage[],
  now: number,
  tx?: unknown,
): Promise<void> {
  const db = tx === undefined ? ctx.pool : asQueryable(tx);
  if (messages.length === 0) return;
  const payload = wakePayload(ctx, { e: unique(messages.map((m) => m.signal)) }, tx !== undefined);
  const params = insertMessagesParams(messages, now);
  try {
    if (payload === null) await q(db, insertMessagesSql(ctx.s, 1), params);
    else {
      const sql = `WITH ins AS (${insertMessagesSql(ctx.s, 1)}) SELECT pg_notify($7, $8)`;
      await q(db, sql, [...params, ctx.channel, payload]);
    }
  } catch (err) {
    throw mapConflict(err);
  }
  if (tx === undefined) ctx.emit(enqueuedEvents(messages));
}
