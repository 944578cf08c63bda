/** Batched, fenced settle of message outcomes on postgres. */
import type { SettleResult, Settlement, StoreEvent } from "../types.ts";
import { type PgContext, q, unique } from "./postgres-context.ts";

/**
 * Batched settle: one UPDATE … FROM unnest(arrays) applies every outcome,
 * fenced by (status inflight, locked_by = worker, attempts = attempt) so a
 * holder whose lease was reclaimed changes nothing. A concurrent claim that
 * reclaimed the row first bumped `attempts`; if we reach the row first, the
 * claimer's EvalPlanQual recheck sees it settled and skips it.
 *
 * Other processes only need a NOTIFY when a settle makes work claimable that
 * was not before: a retry (back to pending) or a keyed message (the next of its
 * key becomes the head). Plain deliveries stay silent, so a busy drain does not
 * wake every listener on every batch. The payload has encodeWake's shape.
 */
export const settleSql = (s: string): string => `
WITH input AS (
  SELECT * FROM unnest($1::text[], $2::text[], $3::integer[], $4::text[], $5::text[])
    WITH ORDINALITY AS x(id, worker, attempt, status, failure, ord)
),
valid AS (
  -- Of several settlements for one id, the first that passes the fence wins, as if applied
  -- one by one. Read without locking: the UPDATE below re-checks the fence on the row it
  -- locks (after a wait, on the version the other transaction left). An explicit FOR
  -- UPDATE pass here wrote a lock record per row and made a 500-row settle ~40 % slower.
  -- ANY (ARRAY(subquery)), not ANY ($1): the planner sizes a subquery array at 10 and
  -- keeps the primary key; with the real 500 ids it chose a sequential scan (14 ms at
  -- 100 000 rows, growing with the table).
  SELECT DISTINCT ON (i.id) i.*
  FROM input i JOIN ${s}.messages l
    ON l.id = i.id AND l.status = 'inflight' AND l.locked_by = i.worker AND l.attempts = i.attempt
  WHERE l.id = ANY (ARRAY(SELECT id FROM input))
  ORDER BY i.id, i.ord
),
upd AS (
  -- A plain join on id: valid is estimated at one row, so this is a primary-key probe per
  -- row, in id order (valid is sorted by id): two batches that share rows (a stale
  -- holder's and the current holder's) lock them in the same order. (An extra
  -- "m.id = ANY ($1)" here re-sorted the whole array on every probe: 256 rows took 50 ms
  -- instead of 5.)
  UPDATE ${s}.messages m
  SET status = i.status, locked_by = NULL, lease_expires_at = NULL, updated_at = $6,
      failures = CASE WHEN i.failure IS NULL THEN m.failures ELSE m.failures || jsonb_build_array(i.failure::jsonb) END
  FROM valid i
  WHERE m.id = i.id AND m.status = 'inflight' AND m.locked_by = i.worker AND m.attempts = i.attempt
  RETURNING m.id, m.signal, (m.status = 'pending' OR m.key IS NOT NULL) AS frees
),
woke AS (
  SELECT json_build_object('o', $8::text, 's', array_agg(DISTINCT signal))::text AS payload FROM upd WHERE frees HAVING count(*) > 0
)
SELECT (SELECT coalesce(array_agg(id), '{}') FROM upd) AS applied,
       (SELECT coalesce(array_agg(DISTINCT signal), '{}') FROM upd WHERE frees) AS signals,
       (SELECT pg_notify($7, CASE WHEN length(payload) <= 7000 THEN payload
                              ELSE json_build_object('o', $8::text, 'w', 1)::text END)
        FROM woke WHERE $7::text IS NOT NULL) AS notified`;

/**
 * The common batch — every outcome "delivered", no failure, one holder — as a
 * lean UPDATE over two arrays: no per-row status, worker or failure to unnest,
 * no DISTINCT ON (duplicate ids update the row once; the outcome is the same).
 * Same fence, same id-order probes, same NOTIFY rule (only keyed rows free work).
 * Measured (claim 500 / settle 500 in turn over 50 000 messages, median of 3):
 * 28 µs per message with settleSql, 22 µs with this.
 */
export const settleDeliveredSql = (s: string): string => `
WITH upd AS (
  UPDATE ${s}.messages m
  SET status = 'delivered', locked_by = NULL, lease_expires_at = NULL, updated_at = $3
  FROM unnest($1::text[], $2::integer[]) AS i(id, attempt)
  -- ANY (ARRAY(subquery)) keeps the primary key (see settleSql). No status test: locked_by is
  -- set only while a message is inflight, and as an index condition "status = 'inflight'"
  -- had the planner read every inflight row of every signal (a BitmapAnd) on each settle.
  WHERE m.id = ANY (ARRAY(SELECT unnest($1::text[])))
    AND m.id = i.id AND m.locked_by = $4 AND m.attempts = i.attempt
  RETURNING m.id, m.signal, m.key IS NOT NULL AS frees
)
SELECT (SELECT coalesce(array_agg(id), '{}') FROM upd) AS applied,
       (SELECT coalesce(array_agg(DISTINCT signal), '{}') FROM upd WHERE frees) AS signals,
       (SELECT pg_notify($5, CASE WHEN length(payload) <= 7000 THEN payload
                              ELSE json_build_object('o', $6::text, 'w', 1)::text END)
        FROM (SELECT json_build_object('o', $6::text, 's', array_agg(DISTINCT signal))::text AS payload
              FROM upd WHERE frees HAVING count(*) > 0) woke
        WHERE $5::text IS NOT NULL) AS notified`;

export async function settle(
  ctx: PgContext,
  settlements: readonly Settlement[],
  now: number,
): Promise<SettleResult> {
  if (settlements.length === 0) return { applied: [] };
  const worker = settlements[0]!.worker;
  const plain = settlements.every(
    (x) => x.status === "delivered" && x.failure === undefined && x.worker === worker,
  );
  const [sql, params] = plain
    ? [
        settleDeliveredSql(ctx.s),
        [
          settlements.map((x) => x.id),
          settlements.map((x) => x.attempt),
          now,
          worker,
          ctx.notify ? ctx.channel : null,
          ctx.origin,
        ],
      ]
    : [settleSql(ctx.s), generalParams(settlements, now, ctx)];
  type Row = { applied: string[]; signals: string[] };
  let rows: Row[];
  try {
    ({ rows } = await q<Row>(ctx.pool, sql, params));
  } catch (err) {
    // Rows are updated in id order, so two settles should never deadlock; if the planner ever
    // breaks that order, PostgreSQL aborts one of them and it is safe to apply it again.
    if ((err as { code?: unknown }).code !== "40P01") throw err;
    ({ rows } = await q<Row>(ctx.pool, sql, params));
  }
  const row = rows[0];
  const appliedSet = new Set(row?.applied ?? []);
  // Caller's order, first occurrence only.
  const applied = unique(settlements.map((x) => x.id).filter((id) => appliedSet.has(id)));
  const events: StoreEvent[] = (row?.signals ?? []).map((signal) => ({ kind: "settled", signal }));
  if (events.length > 0) ctx.emit(events);
  return { applied };
}

function generalParams(settlements: readonly Settlement[], now: number, ctx: PgContext): unknown[] {
  const failure = (x: Settlement): string | null =>
    x.failure === undefined
      ? null
      : JSON.stringify({
          code: x.failure.code,
          message: x.failure.message,
          at: x.failure.at,
          attempt: x.failure.attempt,
        });
  return [
    settlements.map((x) => x.id),
    settlements.map((x) => x.worker),
    settlements.map((x) => x.attempt),
    settlements.map((x) => x.status),
    settlements.map(failure),
    now,
    ctx.notify ? ctx.channel : null,
    ctx.origin,
  ];
}
