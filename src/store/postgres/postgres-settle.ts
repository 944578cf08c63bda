/** Batched, fenced settle of message outcomes on postgres. */
import type { ClaimRelease, SettleHandoff, SettleResult, Settlement, StoreEvent } from "../types.ts";
import { type PgContext, preparedName, q, unique } from "./postgres-context.ts";
import { type MessageRow, toClaimedMessage } from "./postgres-rows.ts";
import { stoppedOwner } from "../wake-rules.ts";

/**
 * The hand-off (Store.settle's SettleHandoff) as CTEs after `upd`, which must
 * return id, signal, key, status (new) and seq. For each key that settled as
 * delivered or dead, the head of what is left of the key (the oldest pending or
 * inflight row other than the one settled — in this statement's snapshot the
 * settled row still reads inflight) is claimed for the hand-off worker if it is
 * pending, no other row of the key is inflight, and no one else has it
 * locked (SKIP LOCKED on the head alone: never a younger row of the key).
 *
 * Why it is safe without the claim's advisory-lock guard: until this statement
 * commits, the settled row holds a live lease, so any claimer's guard (a fresh
 * snapshot) refuses the key; after the commit the successor is inflight. The
 * release and the successor's claim become visible in one commit.
 *
 * `announce`: signals whose settle made work claimable that was not handed off —
 * a retry (back to pending) or a key with a pending successor left behind.
 */
const handoffSql = (s: string, p: { now: string; worker: string; lease: string; max: string }): string => `
settled_keys AS (
  SELECT DISTINCT ON (signal, key) signal, key, seq FROM settled
  WHERE key IS NOT NULL AND status <> 'pending'
  ORDER BY signal, key, seq
),
held AS (
  -- Keys some other row holds inflight (a replayed dead letter's younger successor; live or
  -- expired lease): left to claim. Read once per statement — O(leases), whatever the plan — and
  -- tested as a hashed NOT IN. Per key, as a NOT EXISTS or CASE probe, the planner took
  -- messages_inflight (statistics from before the queue filled) and read every lease of the
  -- signal for each key: 30-37 ms for 256 keys with 500 leases.
  SELECT o.signal, o.key FROM ${s}.messages o
  WHERE o.signal IN (SELECT signal FROM settled_keys) AND o.status = 'inflight' AND o.key IS NOT NULL
    AND o.id NOT IN (SELECT id FROM upd)
),
rehanded AS (
  -- A retry of this batch (same request, same now): what its first commit handed to this worker.
  -- Those successors are inflight (in held), so they are not handed again; they are returned as
  -- claimed again, else nothing would run them until their lease lapsed. Empty unless done is.
  SELECT r.* FROM (SELECT DISTINCT signal, key FROM done WHERE key IS NOT NULL AND status <> 'pending') k
  CROSS JOIN LATERAL (
    SELECT o.* FROM ${s}.messages o
    WHERE o.signal = k.signal AND o.key = k.key AND o.status = 'inflight' AND o.locked_by = ${p.worker}
      AND o.updated_at = ${p.now}::bigint AND o.lease_expires_at = ${p.now}::bigint + ${p.lease}::bigint) r
),
heads AS (
  SELECT h.id FROM settled_keys k CROSS JOIN LATERAL (
    SELECT o.id, o.seq, o.status FROM ${s}.messages o
    WHERE o.signal = k.signal AND o.key = k.key AND o.status IN ('pending', 'inflight') AND o.seq <> k.seq
    ORDER BY o.seq LIMIT 1) h
  WHERE h.status = 'pending' AND (k.signal, k.key) NOT IN (SELECT signal, key FROM held)
  ORDER BY h.seq
  LIMIT GREATEST(${p.max}::integer - (SELECT count(*) FROM rehanded)::integer, 0)
),
locked AS (
  SELECT m.ctid FROM ${s}.messages m
  WHERE m.id = ANY (ARRAY(SELECT id FROM heads)) AND m.status = 'pending'
  FOR UPDATE SKIP LOCKED
),
handed AS (
  UPDATE ${s}.messages m
  SET status = 'inflight', locked_by = ${p.worker}, lease_expires_at = ${p.now}::bigint + ${p.lease}::bigint,
      attempts = m.attempts + 1, updated_at = ${p.now}
  WHERE m.ctid = ANY (ARRAY(SELECT ctid FROM locked))
  RETURNING m.*
),
handed_all AS (
  SELECT * FROM handed UNION ALL SELECT * FROM rehanded
),
announce AS (
  SELECT DISTINCT signal FROM settled WHERE status = 'pending'
  UNION
  -- NOT IN over a subquery is a hashed subplan (a NOT EXISTS here was a nested loop, 13 ms at 256).
  SELECT k.signal FROM settled_keys k
  WHERE (k.signal, k.key) NOT IN (SELECT h.signal, h.key FROM handed_all h)
    -- Another live row of the key (messages_key_head; "status = 'pending'" here was planned on
    -- messages_ready_keyed, a walk of the signal's whole keyed backlog per key).
    AND EXISTS (SELECT 1 FROM ${s}.messages o
                WHERE o.signal = k.signal AND o.key = k.key AND o.status IN ('pending', 'inflight')
                  AND o.key IS NOT NULL AND o.seq <> k.seq)
),
summary AS (
  SELECT (SELECT coalesce(array_agg(id), '{}') FROM settled) AS applied,
         (SELECT coalesce(array_agg(signal), '{}') FROM announce) AS signals
)`;

/** Channel, origin: the NOTIFY of the signals in `announce`, then one row per handed message. */
const settleTail = (channel: string, origin: string): string => `,
notified AS (
  SELECT pg_notify(${channel}, CASE WHEN length(payload) <= 7000 THEN payload
                      ELSE json_build_object('o', ${origin}::text, 'w', 1)::text END) AS n
  FROM (SELECT json_build_object('o', ${origin}::text, 's', array_agg(signal))::text AS payload
        FROM announce HAVING count(*) > 0) woke
  WHERE ${channel}::text IS NOT NULL
)
SELECT s.applied, s.signals, (SELECT count(*) FROM notified) AS notified, h.*
FROM summary s LEFT JOIN handed_all h ON true`;

/**
 * The settle's input and its fenced UPDATE, up to (not including) RETURNING: shared by settleSql
 * and settleHandoffSql, which return different columns from it. Parameters: $1 ids, $2 workers,
 * $3 attempts, $4 statuses, $5 failures, $6 now.
 */
const generalUpdate = (s: string): string => `WITH input AS (
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
`;

/**
 * Idempotent retry. A settle whose COMMIT succeeded but whose answer the client lost (a connection
 * reset) is sent again with the same request and the same `now`; the fence then refuses every row,
 * since it is no longer inflight. `done`: the rows this same settle already left in its target
 * state — status, attempt, lease cleared, updated_at = now (and, for a failure, the last failure
 * recorded) — counted as applied again, so the retry returns what the first commit did. Only read
 * when `upd` missed some input (the gate is a one-time filter): the common settle pays nothing.
 * `settled`: upd and done, which the summaries and the hand-off read. `cols` over m: the columns
 * of upd's RETURNING.
 */
const generalDone = (s: string, cols: string): string => `),
done AS (
  SELECT DISTINCT ON (m.id) ${cols}
  FROM input i JOIN ${s}.messages m ON m.id = i.id
  WHERE (SELECT count(*) FROM upd) < cardinality($1::text[])
    AND m.id = ANY (ARRAY(SELECT id FROM input))
    AND m.status = i.status AND m.locked_by IS NULL AND m.attempts = i.attempt AND m.updated_at = $6::bigint
    AND (i.failure IS NULL OR m.failures -> -1 = i.failure::jsonb)
  ORDER BY m.id, i.ord
),
settled AS (
  SELECT * FROM upd UNION ALL SELECT * FROM done
`;

/** generalDone for the all-delivered statements ($1 ids, $2 attempts, $3 now). */
const deliveredDone = (s: string, cols: string): string => `),
done AS (
  SELECT ${cols} FROM ${s}.messages m JOIN unnest($1::text[], $2::integer[]) AS i(id, attempt) ON m.id = i.id
  WHERE (SELECT count(*) FROM upd) < cardinality($1::text[])
    AND m.id = ANY (ARRAY(SELECT unnest($1::text[])))
    AND m.status = 'delivered' AND m.locked_by IS NULL AND m.attempts = i.attempt AND m.updated_at = $3::bigint
),
settled AS (
  SELECT * FROM upd UNION ALL SELECT * FROM done
`;

/**
 * The all-delivered settle's UPDATE, up to (not including) RETURNING: shared by settleDeliveredSql
 * and settleDeliveredHandoffSql. Parameters: $1 ids, $2 attempts, $3 now, $4 worker.
 */
const deliveredUpdate = (s: string): string => `WITH upd AS (
  UPDATE ${s}.messages m
  SET status = 'delivered', locked_by = NULL, lease_expires_at = NULL, updated_at = $3
  FROM unnest($1::text[], $2::integer[]) AS i(id, attempt)
  -- ANY (ARRAY(subquery)) keeps the primary key (see generalUpdate). No status test: locked_by is
  -- set only while a message is inflight, and as an index condition "status = 'inflight'"
  -- had the planner read every inflight row of every signal (a BitmapAnd) on each settle.
  WHERE m.id = ANY (ARRAY(SELECT unnest($1::text[])))
    AND m.id = i.id AND m.locked_by = $4 AND m.attempts = i.attempt
`;

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
${generalUpdate(s)}  RETURNING m.id, m.signal, (m.status = 'pending' OR m.key IS NOT NULL) AS frees
${generalDone(s, "m.id, m.signal, (m.status = 'pending' OR m.key IS NOT NULL) AS frees")}),
woke AS (
  SELECT json_build_object('o', $8::text, 's', array_agg(DISTINCT signal))::text AS payload FROM settled WHERE frees HAVING count(*) > 0
)
SELECT (SELECT coalesce(array_agg(id), '{}') FROM settled) AS applied,
       (SELECT coalesce(array_agg(DISTINCT signal), '{}') FROM settled WHERE frees) AS signals,
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
${deliveredUpdate(s)}  RETURNING m.id, m.signal, m.key IS NOT NULL AS frees
${deliveredDone(s, "m.id, m.signal, m.key IS NOT NULL AS frees")})
${deliveredTail("count(*) = cardinality($1::text[])")}`;

/**
 * A lone delivered settle (S4: one emit at a time, each handler's settle alone) is migration
 * 0020's settle_delivered_one (settleDeliveredOneCall): settleDeliveredSql's UPDATE for one
 * primary key plus the retry lookup (see generalDone), with this module's tail. Its text lives in
 * the migration only (migrations are frozen; a copy here went dead when the call replaced it).
 * Not sent as a prepared statement: a generic plan made while `messages` holds a page or two is a
 * sequential scan, kept on that connection until an ANALYZE (measured on `runs`: 20–39 ms a call
 * once 200 000 rows had arrived; bench/README.md, S9 second pass); the function keeps its plan off
 * sequential scans. Parameters: $1 id, $2 attempt, then as settleDeliveredSql.
 */

/**
 * What settleDeliveredSql and settle_delivered_one (migration 0020) return: applied ids, freed signals, the NOTIFY
 * ($5 channel, $6 origin). `all` says every input row was applied: then `applied` is NULL instead
 * of the ids — the common batch, whose 256 ids the server aggregated and sent back and the driver
 * parsed, only for settle() to find each one applied (~1 µs of Node CPU per message).
 */
const deliveredTail = (
  all: string,
): string => `SELECT (SELECT CASE WHEN ${all} THEN NULL ELSE coalesce(array_agg(id), '{}') END FROM settled) AS applied,
       (SELECT coalesce(array_agg(DISTINCT signal), '{}') FROM settled WHERE frees) AS signals,
       (SELECT pg_notify($5, CASE WHEN length(payload) <= 7000 THEN payload
                              ELSE json_build_object('o', $6::text, 'w', 1)::text END)
        FROM (SELECT json_build_object('o', $6::text, 's', array_agg(DISTINCT signal))::text AS payload
              FROM settled WHERE frees HAVING count(*) > 0) woke
        WHERE $5::text IS NOT NULL) AS notified`;

/** settleSql with the hand-off ($9 worker, $10 lease ms, $11 max). */
export const settleHandoffSql = (s: string): string => `
${generalUpdate(s)}  RETURNING m.id, m.signal, m.key, m.status, m.seq
${generalDone(s, "m.id, m.signal, m.key, m.status, m.seq")}),
${handoffSql(s, { now: "$6", worker: "$9", lease: "$10", max: "$11" })}${settleTail("$7", "$8")}`;

/** settleDeliveredSql with the hand-off to the settling worker ($7 lease ms, $8 max). */
export const settleDeliveredHandoffSql = (s: string): string => `
${deliveredUpdate(s)}  RETURNING m.id, m.signal, m.key, m.status, m.seq
${deliveredDone(s, "m.id, m.signal, m.key, m.status, m.seq")}),
${handoffSql(s, { now: "$3", worker: "$4", lease: "$7", max: "$8" })}${settleTail("$5", "$6")}`;

/**
 * The call of migration 0020's settle_delivered_one (parameters as described above), planned
 * once per connection inside PL/pgSQL; prepared by name, text and name built
 * once per schema. Backend CPU per lone settle 1 200 -> 475 µs (bench/README.md, "Settle
 * planning"). The batch (settleDeliveredSql) is still sent as is: as a function its planning
 * went (0.6 ms a call) but S5's backend CPU per message did not fall measurably.
 */
const deliveredOneCalls = new Map<string, { text: string; name: string }>();
export function settleDeliveredOneCall(s: string): { text: string; name: string } {
  let c = deliveredOneCalls.get(s);
  if (c === undefined) {
    const text = `SELECT applied, signals FROM ${s}.settle_delivered_one($1::text, $2::integer, $3::bigint, $4::text, $5::text, $6::text)`;
    c = { text, name: preparedName("settled1", text) };
    deliveredOneCalls.set(s, c);
  }
  return c;
}

/**
 * The call of migration 0024's settle_delivered_batch: settleDeliveredSql word for word (its
 * `notified` cast to text) with a plan made once per connection (generic, no nested loops, no
 * sequential or bitmap scans: see the migration), prepared by name. settleDeliveredSql stays the
 * text of reference (postgres-prepared.test.ts checks the function's body is this text); changing
 * it means a new migration replacing the function. Measured: bench/README.md, "S5, fourth pass".
 */
const deliveredBatchCalls = new Map<string, { text: string; name: string }>();
export function settleDeliveredBatchCall(s: string): { text: string; name: string } {
  let c = deliveredBatchCalls.get(s);
  if (c === undefined) {
    const text = `SELECT applied, signals FROM ${s}.settle_delivered_batch($1::text[], $2::integer[], $3::bigint, $4::text, $5::text, $6::text)`;
    c = { text, name: preparedName("settledn", text) };
    deliveredBatchCalls.set(s, c);
  }
  return c;
}

export async function settle(
  ctx: PgContext,
  settlements: readonly Settlement[],
  now: number,
  handoff?: SettleHandoff,
): Promise<SettleResult> {
  if (settlements.length === 0) return { applied: [] };
  const worker = settlements[0]!.worker;
  const plain = settlements.every(
    (x) => x.status === "delivered" && x.failure === undefined && x.worker === worker,
  );
  // A hand-off to another holder than the settling one goes through the general statement.
  const max = handoff === undefined ? 0 : Math.max(0, Math.floor(handoff.max));
  const leaseMs = handoff?.leaseMs ?? 0;
  let sql: string;
  let name: string | undefined;
  let params: unknown[];
  if (plain && max === 0 && settlements.length === 1) {
    ({ text: sql, name } = settleDeliveredOneCall(ctx.s));
    const one = settlements[0]!;
    params = [one.id, one.attempt, now, worker, ctx.notify ? ctx.channel : null, ctx.origin];
  } else if (plain && (max === 0 || handoff!.worker === worker)) {
    if (max === 0) ({ text: sql, name } = settleDeliveredBatchCall(ctx.s));
    else sql = settleDeliveredHandoffSql(ctx.s);
    params = [
      settlements.map((x) => x.id),
      settlements.map((x) => x.attempt),
      now,
      worker,
      ctx.notify ? ctx.channel : null,
      ctx.origin,
    ];
  } else {
    sql = max === 0 ? settleSql(ctx.s) : settleHandoffSql(ctx.s);
    params = generalParams(settlements, now, ctx);
    if (max > 0) params.push(handoff!.worker);
  }
  // Without a hand-off the statements are the lean ones of before: no extra planning for unkeyed batches.
  if (max > 0) params.push(leaseMs, max);
  type Row = { applied: string[] | null; signals: string[] } & ({ id: null } | MessageRow);
  let rows: Row[];
  try {
    ({ rows } = await q<Row>(ctx.pool, sql, params, name));
  } catch (err) {
    // Rows are updated in id order, so two settles should never deadlock; if the planner ever
    // breaks that order, PostgreSQL aborts one of them and it is safe to apply it again.
    if ((err as { code?: unknown }).code !== "40P01") throw err;
    ({ rows } = await q<Row>(ctx.pool, sql, params, name));
  }
  const row = rows[0];
  const ids = settlements.map((x) => x.id);
  // NULL: every id applied (settleDeliveredSql). Else the caller's order, first occurrence only.
  let applied: string[];
  if (row !== undefined && row.applied === null) applied = unique(ids);
  else {
    const appliedSet = new Set(row?.applied ?? []);
    applied = unique(ids.filter((id) => appliedSet.has(id)));
  }
  const events: StoreEvent[] = (row?.signals ?? []).map((signal) => ({ kind: "settled", signal }));
  if (events.length > 0) ctx.emit(events);
  const handed = rows.filter((r): r is Row & MessageRow => typeof r.id === "string");
  if (handed.length === 0) return { applied };
  handed.sort((a, b) => a.seq - b.seq);
  return { applied, claimed: handed.map(toClaimedMessage) };
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

/**
 * Store.releaseClaimed: claims given back unstarted go back to pending as if never claimed
 * (attempts - 1), fenced like a settle by (status inflight, locked_by, attempts). A keyed row
 * keeps its seq, so it is still its key's head for the next claim; nothing else marks a head.
 * Announced as a retry settle is (the NOTIFY payload of settleSql). Parameters: $1 ids,
 * $2 workers, $3 attempts, $4 now, $5 channel (NULL: no NOTIFY), $6 origin.
 */
export const releaseClaimedSql = (s: string): string => `WITH input AS (
  SELECT * FROM unnest($1::text[], $2::text[], $3::integer[]) WITH ORDINALITY AS x(id, worker, attempt, ord)
),
valid AS (
  -- As settle's: of several entries for one id, the first that passes the fence; id order, so
  -- rows are locked in the order settles lock them.
  SELECT DISTINCT ON (i.id) i.*
  FROM input i JOIN ${s}.messages l
    ON l.id = i.id AND l.status = 'inflight' AND l.locked_by = i.worker AND l.attempts = i.attempt
  WHERE l.id = ANY (ARRAY(SELECT id FROM input))
  ORDER BY i.id, i.ord
),
upd AS (
  -- The fence again on the row locked: a claim that reclaimed it meanwhile changed attempts.
  UPDATE ${s}.messages m
  SET status = 'pending', attempts = m.attempts - 1, locked_by = NULL, lease_expires_at = NULL, updated_at = $4
  FROM valid i
  WHERE m.id = i.id AND m.status = 'inflight' AND m.locked_by = i.worker AND m.attempts = i.attempt
  RETURNING m.id, m.signal
),
woke AS (
  SELECT json_build_object('o', $6::text, 's', array_agg(DISTINCT signal))::text AS payload FROM upd HAVING count(*) > 0
)
SELECT (SELECT coalesce(array_agg(id), '{}') FROM upd) AS applied,
       (SELECT coalesce(array_agg(DISTINCT signal), '{}') FROM upd) AS signals,
       (SELECT pg_notify($5, CASE WHEN length(payload) <= 7000 THEN payload
                              ELSE json_build_object('o', $6::text, 'w', 1)::text END)
        FROM woke WHERE $5::text IS NOT NULL) AS notified`;

export async function releaseClaimed(
  ctx: PgContext,
  claims: readonly ClaimRelease[],
  now: number,
): Promise<string[]> {
  if (claims.length === 0) return [];
  const params = [
    claims.map((c) => c.id),
    claims.map((c) => c.worker),
    claims.map((c) => c.attempt),
    now,
    ctx.notify ? ctx.channel : null,
    ctx.origin,
  ];
  const { rows } = await q<{ applied: string[]; signals: string[] }>(
    ctx.pool,
    releaseClaimedSql(ctx.s),
    params,
  );
  const row = rows[0];
  const released = new Set(row?.applied ?? []);
  const events: StoreEvent[] = (row?.signals ?? []).map((signal) => ({ kind: "settled", signal }));
  if (events.length > 0) ctx.emit(events);
  // The caller's order, first occurrence only (as settle's `applied`).
  return unique(claims.map((c) => c.id).filter((id) => released.has(id)));
}

/**
 * Store.leaveClaimsToLease: a graceful stop's claims whose handlers still run keep their attempts,
 * lease and expiry, under holder `<worker>#stopped` (claim-rules leftClaim); the claim after the
 * lapse adds no attempt for such a holder (claimSql, migration 0029). One UPDATE for the batch,
 * fenced like a settle; a retry matches the marked row on its second arm and writes it unchanged
 * (reported again). Nothing to announce: nothing became claimable. Once per stop, off the hot path.
 */
export async function leaveClaimsToLease(
  ctx: PgContext,
  claims: readonly ClaimRelease[],
  now: number,
): Promise<string[]> {
  if (claims.length === 0) return [];
  const { rows } = await q<{ id: string }>(
    ctx.pool,
    `UPDATE ${ctx.s}.messages m
     SET locked_by = x.left_worker,
         updated_at = CASE WHEN m.locked_by = x.worker THEN $5 ELSE m.updated_at END
     FROM unnest($1::text[], $2::text[], $3::text[], $4::integer[]) AS x(id, worker, left_worker, attempt)
     WHERE m.id = x.id AND m.status = 'inflight' AND m.attempts = x.attempt
       AND m.locked_by IN (x.worker, x.left_worker)
     RETURNING m.id`,
    [
      claims.map((c) => c.id),
      claims.map((c) => c.worker),
      claims.map((c) => stoppedOwner(c.worker)),
      claims.map((c) => c.attempt),
      now,
    ],
  );
  const left = new Set(rows.map((r) => r.id));
  return unique(claims.map((c) => c.id).filter((id) => left.has(id)));
}
