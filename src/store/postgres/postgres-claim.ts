/** The postgres claim: one statement claims up to `max` messages of one signal. */
import type { ClaimedMessage, ClaimRequest } from "../types.ts";
import { type PgContext, preparedName, q } from "./postgres-context.ts";
import { type ClaimedRow, type MessageRow, toClaimedMessage } from "./postgres-rows.ts";

/**
 * THE hot query: one statement claims up to `max` messages of one signal.
 *
 * Eligible: `pending`, or `inflight` whose lease expired at `$now` (lazy
 * reclaim — no sweeper). A keyed message is eligible only as the head of its
 * (signal, key): no older pending/inflight message of that key exists. Order
 * (the memory driver's): expired leases first, by expiry; then pending rows,
 * unkeyed and keyed heads merged by emit order (`seq`).
 *
 * Parts, each `FOR UPDATE SKIP LOCKED` so concurrent claimers take disjoint rows:
 * - reclaim: expired inflight rows (messages_inflight index).
 * - unkeyed: messages_ready_unkeyed in seq order; stops at LIMIT, O(max).
 * - keyed: messages_ready_keyed in seq order, at most max(WALK, 4·max) rows
 *   examined. Without the bound a backlog of blocked keys was walked row by
 *   row on every claim. Heads are told by a sort of the walk and the signal's
 *   inflight keyed rows (keyed_cand; no per-row probe since migration 0026),
 *   locked, then guarded all at once (keyed_free: claim_keys_free, 0002).
 * - loose: only when the keyed walk came back short AND was cut off: a loose
 *   index scan over distinct keys (messages_key_head), one probe per key, up
 *   to LOOSE_KEYS keys, finds the heads further back. Reclaimed and loose
 *   keyed rows go through the batched guard too (since 0026; before, the
 *   per-row claim_key_free of 0001, the last reader of messages_key_inflight).
 * The picked rows are updated by ctid (each is locked by this statement).
 *
 * Why the per-key guard (claim_key_free, migration 0001): SKIP LOCKED keeps
 * two claimers off the same ROW, not off the same KEY. Heads are judged in the
 * statement's snapshot, and snapshots can disagree about which row is the
 * head: an emit that committed late with a smaller seq, or a replayed dead
 * letter (it keeps its seq), makes a different row the head for a claimer that
 * started later — while the first claim is not committed and so invisible.
 * Both would go inflight (postgres-claim.test.ts reproduces this without the
 * guard). The guard takes a transaction advisory lock on hash(signal, key)
 * with pg_try_advisory_xact_lock (a busy key is skipped, never waited on) and
 * then checks, in a fresh snapshot (VOLATILE plpgsql), that no other message
 * of the key holds a live lease: a claim committed earlier is visible to that
 * check, one not yet committed still holds the lock. Unkeyed rows never call it.
 * The batched form reads the signal's live leases once per claim: the per-row
 * probe's cached plan walked all of them for every head (stale statistics).
 *
 * Migration 0026 (bench/README.md, "S5, fifth pass"): the keyed walk without head probes,
 * messages_key_inflight dropped; S5 server CPU per 1 000 jobs 76 -> 67 ms (median of 3, load ~1).
 *
 * Measured earlier (PostgreSQL 15 on the 2-core dev box, bench/postgres-drain.ts,
 * concurrency 32, claim batches + batched settle, one process):
 * - 4 stores on separate pools, 2 000 messages over 50 keys, in parallel:
 *   each claimed once, never two of a key inflight (postgres-claim.test.ts).
 * - EXPLAIN ANALYZE, 32 rows, 100 000 queued: unkeyed 0.5 ms, 1 000 keys
 *   1.5 ms (mostly the guard, ~25 µs a head), 8 hot keys 0.6 ms; plus ~1-2 ms
 *   of planning (statements are not prepared: see q() in postgres-context.ts).
 * - Drain while other benchmarks shared the box (load average 2-5):
 *   100 000 unkeyed 6 300-6 800/s, 100 000 over 1 000 keys 3 900-5 400/s,
 *   10 000 over 8 hot keys ~530/s; claims averaged ~5 ms a round trip.
 *   With named prepared statements it reached ~15 000/s unkeyed, but their
 *   generic plans went stale as the table grew (see q()), so they are off.
 * - Before the walk was bounded, 8 hot keys drained at 73/s: every claim
 *   walked the whole blocked backlog (~53 ms at 10 000 queued).
 * - Since then, signals with nothing keyed or expired take fastClaimSql below
 *   (planning ~0.3 ms instead of ~1.5): a whole app drained 100 000 unkeyed
 *   messages at 23 000-29 000/s with prefetch 500 (bench/README.md).
 * - Keyed, 1 000 keys × 50 with ~530 keys held (prefetch 500), 282 rows:
 *   per-row guard + join on id 33 ms; update by ctid 16 ms; batched guard
 *   ~11 ms (+ ~3 ms planning). App drain 7 600 → 12 700/s.
 */
const WALK = 256;
const LOOSE_KEYS = 1_000;

/**
 * A keyed row `m` is its key's head: no older pending or inflight row of its key (the reclaim's
 * probe; the guard runs on the locked candidates after it). CASE keeps it a per-row index probe:
 * as a NOT EXISTS the planner made it an anti join.
 */
const keyedHead = (s: string): string => `
  CASE WHEN EXISTS (
    SELECT 1 FROM ${s}.messages o
    WHERE o.signal = m.signal AND o.key = m.key AND o.seq < m.seq AND o.status IN ('pending', 'inflight'))
  THEN false ELSE true END`;

/**
 * What a claim returns per row: what ClaimedMessage carries, and seq for the order. Not m.*: the
 * status, failures and updated_at of every claimed row were serialised by the server and parsed
 * by the driver (failures as JSON) only to be dropped.
 */
const claimedColumns =
  "m.id, m.signal, m.key, m.payload, m.parent_run_id, m.attempts, m.created_at, m.locked_by, m.lease_expires_at, m.seq";

export const claimSql = (s: string): string => `
WITH RECURSIVE
reclaim_cand AS (
  SELECT m.id, m.ctid, m.key, m.lease_expires_at AS expired_at, m.seq FROM ${s}.messages m
  WHERE m.signal = $1 AND m.status = 'inflight' AND m.lease_expires_at <= $2
    AND (m.key IS NULL OR (${keyedHead(s)}))
  ORDER BY m.lease_expires_at, m.seq
  LIMIT $3
  FOR UPDATE SKIP LOCKED
),
reclaim AS (
  SELECT c.id, c.ctid, c.expired_at, c.seq FROM reclaim_cand c
  WHERE c.key IS NULL OR c.key = ANY ((SELECT keys FROM (
    SELECT CASE WHEN EXISTS (SELECT 1 FROM reclaim_cand WHERE key IS NOT NULL)
      THEN ${s}.claim_keys_free($1, ARRAY(SELECT key FROM reclaim_cand WHERE key IS NOT NULL), $2)
      ELSE '{}'::text[] END AS keys) f)::text[])
),
need AS (SELECT GREATEST($3 - (SELECT count(*) FROM reclaim), 0) AS n),
unkeyed AS (
  SELECT m.id, m.ctid, m.seq FROM ${s}.messages m
  WHERE m.signal = $1 AND m.status = 'pending' AND m.key IS NULL
  ORDER BY m.seq
  LIMIT (SELECT n FROM need)
  FOR UPDATE SKIP LOCKED
),
keyed_cand AS (
  SELECT m.id, m.ctid, m.seq, m.key
  FROM (
    -- The head probe without a probe: the walk (the oldest pending keyed rows, in seq order) and
    -- every inflight keyed row of the signal, sorted by (key, seq); a key's first row is its head
    -- when it is a walked (pending) row — no row of the key older than it is pending (it would
    -- be in the walk before it) or inflight. One read of the leases and one sort instead of a
    -- probe per walked row and the busy-key array test; joins here were planned as nested loops.
    SELECT w.ctid, w.seq FROM (
      SELECT DISTINCT ON (key) ctid, seq, key FROM (
        SELECT * FROM (
          SELECT ctid, seq, key FROM ${s}.messages
          WHERE signal = $1 AND status = 'pending' AND key IS NOT NULL
          ORDER BY seq LIMIT GREATEST(${WALK}, 4 * $3)) w0
        UNION ALL
        SELECT NULL::tid, seq, key FROM ${s}.messages
        WHERE signal = $1 AND status = 'inflight' AND key IS NOT NULL) u
      ORDER BY key, seq) w
    WHERE w.ctid IS NOT NULL
    ORDER BY w.seq
    OFFSET 0 -- a fence: heads are found here, before the join locks rows (in seq order, lazily)
  ) h
  -- By ctid: the walk above read these row versions in this statement's snapshot. A row changed
  -- since then fails the lock's recheck (new version, other ctid, not pending) and is skipped; a
  -- claim committed meanwhile on an older row of the key is the guard's to see (keyed_free).
  JOIN ${s}.messages m ON m.ctid = h.ctid
  WHERE m.status = 'pending'
  ORDER BY h.seq
  LIMIT (SELECT n FROM need)
  FOR UPDATE OF m SKIP LOCKED
),
keyed_free AS (
  -- The guard for all candidate heads at once (claim_keys_free, migration 0002); a head whose
  -- key it refuses stays locked but untouched until this statement commits.
  SELECT CASE WHEN EXISTS (SELECT 1 FROM keyed_cand)
    THEN ${s}.claim_keys_free($1, ARRAY(SELECT key FROM keyed_cand), $2)
    ELSE '{}'::text[] END AS keys
),
keyed AS (
  -- IS TRUE keeps the IN a hashed subplan (as a plain IN it was a nested loop semi join).
  SELECT c.id, c.ctid, c.seq FROM keyed_cand c WHERE (c.key IN (SELECT unnest(f.keys) FROM keyed_free f)) IS TRUE
),
short AS (
  -- CASE: the count below runs only when the walk came back short. It asks "more
  -- keyed rows queued than the walk looks at?" without ORDER BY, so any scan can
  -- stop after that many rows (with ORDER BY … OFFSET one plan sorted all 53 000).
  SELECT (SELECT n FROM need) - (SELECT count(*) FROM keyed) AS n
  WHERE CASE WHEN (SELECT count(*) FROM keyed) < (SELECT n FROM need)
    THEN (SELECT count(*) FROM (
            SELECT 1 FROM ${s}.messages
            WHERE signal = $1 AND status = 'pending' AND key IS NOT NULL
            LIMIT GREATEST(${WALK}, 4 * $3) + 1) x) > GREATEST(${WALK}, 4 * $3)
    ELSE false END
),
loose_keys (key, depth) AS (
  (SELECT key, 1 FROM ${s}.messages
   WHERE signal = $1 AND key IS NOT NULL AND status IN ('pending', 'inflight') AND EXISTS (SELECT 1 FROM short)
   ORDER BY key LIMIT 1)
  UNION ALL
  SELECT nxt.key, k.depth + 1 FROM loose_keys k CROSS JOIN LATERAL (
    SELECT key FROM ${s}.messages
    WHERE signal = $1 AND key > k.key AND status IN ('pending', 'inflight')
    ORDER BY key LIMIT 1) nxt
  WHERE k.depth < ${LOOSE_KEYS}
),
loose_cand AS (
  SELECT m.id, m.ctid, m.seq, m.key
  FROM (SELECT h.id, h.seq FROM loose_keys k CROSS JOIN LATERAL (
          SELECT id, seq, status FROM ${s}.messages
          WHERE signal = $1 AND key = k.key AND status IN ('pending', 'inflight')
          ORDER BY seq LIMIT 1) h
        WHERE h.status = 'pending'
        ORDER BY h.seq) c
  JOIN ${s}.messages m ON m.id = c.id
  WHERE m.status = 'pending' AND m.id NOT IN (SELECT id FROM keyed_cand)
  ORDER BY c.seq
  LIMIT coalesce((SELECT n FROM short), 0)
  FOR UPDATE OF m SKIP LOCKED
),
loose AS (
  -- The loose heads were probed in this snapshot (LIMIT 1 per key above); the guard as for keyed.
  SELECT c.id, c.ctid, c.seq FROM loose_cand c WHERE c.key = ANY ((SELECT keys FROM (
    SELECT CASE WHEN EXISTS (SELECT 1 FROM loose_cand)
      THEN ${s}.claim_keys_free($1, ARRAY(SELECT key FROM loose_cand), $2)
      ELSE '{}'::text[] END AS keys) f)::text[])
),
picked AS (
  SELECT ctid FROM reclaim
  UNION ALL
  (SELECT ctid FROM (
     SELECT ctid, seq FROM unkeyed UNION ALL SELECT ctid, seq FROM keyed UNION ALL SELECT ctid, seq FROM loose) r
   ORDER BY seq LIMIT (SELECT n FROM need))
),
upd AS (
  -- By ctid: every picked row is locked by this statement, so it cannot move. (A join
  -- on id was planned as a nested loop over picked — estimated at 4 rows — and cost
  -- ~8 ms for 282 rows, quadratic.)
  -- A lease a graceful stop left (holder '<worker>#stopped', leaveClaimsToLease) is the same
  -- attempt again: no + 1 (claim-rules claimCounts). Pending rows have no holder (NULL: + 1).
  UPDATE ${s}.messages m
  SET status = 'inflight', locked_by = $4, lease_expires_at = $2::bigint + $5::bigint,
      attempts = m.attempts + CASE WHEN m.locked_by LIKE '%#stopped' THEN 0 ELSE 1 END, updated_at = $2
  WHERE m.ctid = ANY (ARRAY(SELECT ctid FROM picked))
  RETURNING ${claimedColumns}
)
-- Reclaimed rows carry their old expiry for ordering (reclaim is small: expired leases only).
SELECT u.*, r.expired_at AS ord1, u.seq AS ord2 FROM upd u LEFT JOIN reclaim r ON r.id = u.id`;

/**
 * The common case in one cheap statement: no keyed message is pending and no
 * lease has expired, so the full claim above would take exactly the oldest
 * unkeyed pending rows. The gate checks that (two index probes) and the
 * statement claims only when it holds; `open` comes back even when nothing was
 * claimed (the LEFT JOIN), so a closed gate is told apart from an empty queue.
 *
 * Why a second statement: the full claim takes ~1.2-1.8 ms to plan, this one
 * ~0.3 ms (EXPLAIN ANALYZE, 100 000 queued), and planning is paid on every
 * call (see q()). Claiming 500 rows: planning + execution ~3 ms → ~6 ms full.
 */
export const fastClaimSql = (s: string): string => `
WITH gate AS (
  SELECT NOT EXISTS (SELECT 1 FROM ${s}.messages WHERE signal = $1 AND status = 'pending' AND key IS NOT NULL)
     AND NOT EXISTS (SELECT 1 FROM ${s}.messages WHERE signal = $1 AND status = 'inflight' AND lease_expires_at <= $2)
     AS open
),
picked AS (
  SELECT ctid FROM ${s}.messages
  WHERE signal = $1 AND status = 'pending' AND key IS NULL AND (SELECT open FROM gate)
  ORDER BY seq LIMIT $3
  FOR UPDATE SKIP LOCKED
),
upd AS (
  UPDATE ${s}.messages m
  SET status = 'inflight', locked_by = $4, lease_expires_at = $2::bigint + $5::bigint,
      attempts = m.attempts + 1, updated_at = $2
  WHERE m.ctid = ANY (ARRAY(SELECT ctid FROM picked))
  RETURNING ${claimedColumns}
)
SELECT g.open, u.* FROM gate g LEFT JOIN upd u ON true`;

/**
 * The full claim as it is sent: the call of migration 0023's claim_messages, which runs claimSql
 * above word for word with a plan made once per connection (generic, kept off sequential and
 * bitmap scans: see the migration), prepared by name (not on a pool marked unprepared, where it is
 * sent unnamed and the function still keeps its plan). claimSql stays the text of reference: the
 * tests run it as a statement too (the guard's race, without the guard) and check that the
 * function's body is this text. Changing claimSql means a new migration replacing the function.
 * Measured (bench/README.md, "S5, fourth pass"): backend CPU per message claimed and settled in
 * S5's claim/settle loop 61–68 -> 49–53 µs (bench/s5-claim-cost.ts).
 */
const claimCalls = new Map<string, { text: string; name: string }>();
export function claimCall(s: string): { text: string; name: string } {
  let c = claimCalls.get(s);
  if (c === undefined) {
    const text = `SELECT * FROM ${s}.claim_messages($1::text, $2::bigint, $3::integer, $4::text, $5::bigint)`;
    c = { text, name: preparedName("claim", text) };
    claimCalls.set(s, c);
  }
  return c;
}

/** The columns claimedColumns returns. */
type Claimed = ClaimedRow & Pick<MessageRow, "seq">;
type ClaimRow = Claimed & { ord1: number | null; ord2: number };
type FastRow = { open: boolean } & ({ id: null } | Claimed);

/**
 * Signals whose last claim met keyed or expired rows: they go straight to the
 * full statement (the gate would only send them there) until a full claim
 * takes neither kind.
 */
const needsFull = new WeakMap<PgContext, Set<string>>();

export async function claim(ctx: PgContext, req: ClaimRequest): Promise<ClaimedMessage[]> {
  if (req.max <= 0) return [];
  let full = needsFull.get(ctx);
  if (full === undefined) needsFull.set(ctx, (full = new Set()));
  const params = [req.signal, req.now, req.max, req.worker, req.leaseMs];
  if (!full.has(req.signal)) {
    const { rows } = await q<FastRow>(ctx.pool, fastClaimSql(ctx.s), params);
    if (rows[0]?.open === true) {
      const got = rows.filter((r): r is FastRow & Claimed => r.id !== null);
      got.sort((a, b) => a.seq - b.seq);
      return got.map(toClaimedMessage);
    }
  }
  const call = claimCall(ctx.s);
  const { rows } = await q<ClaimRow>(ctx.pool, call.text, params, call.name);
  // Reclaimed (ord1 = old expiry) before ready (ord1 NULL), then emit order.
  rows.sort((a, b) => (a.ord1 ?? Infinity) - (b.ord1 ?? Infinity) || a.ord2 - b.ord2);
  if (rows.some((r) => r.ord1 !== null || r.key !== null)) full.add(req.signal);
  else full.delete(req.signal);
  return rows.map(toClaimedMessage);
}
