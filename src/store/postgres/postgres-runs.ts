/** Postgres run leases and journal reads. */
import { JournalLeaseBusy } from "../../errors.ts";
import { storeErrors } from "../index.ts";
import type {
  AcquireRequest,
  AcquiredRun,
  ClaimDueRunsRequest,
  JournalEntry,
  JournalEnds,
  LeaveToLeaseRequest,
  ReleaseRequest,
  RunFlowFilter,
  RunRecord,
  RunStatus,
  StartRun,
  TerminateOutcome,
  TerminateRequest,
} from "../types.ts";
import { terminateState, wholeCount } from "../journal-rules.ts";
import { recoveredFrom as recoveredFromRule, STOPPED_OWNER_SUFFIX, stoppedOwner } from "../wake-rules.ts";
import { type PgContext, preparedName, q, wakePayload } from "./postgres-context.ts";
import { type EntryRow, jsonParam, type RunRow, toJournalEntry, toRunRecord } from "./postgres-rows.ts";

/**
 * Run leases and reads of the journal. Lease rule (the memory driver's): a
 * run's lease can be taken when it is free, expired, or already ours; a
 * terminal run refuses. Each take is one UPDATE, so two instances racing for
 * one run serialize on its row and exactly one wins.
 */

export interface LeaseReq {
  runId: string;
  owner: string;
  now: number;
  leaseMs: number;
}

/** A take resumes a sleeper as running; a compensating run stays compensating. */
const keepCompensating = "CASE WHEN status = 'compensating' THEN status ELSE 'running' END";

/**
 * The recovery count after a take by `owner` (SET reads the row as it was): wake-rules
 * takeIsRecovery. One more when another holder's lease had lapsed — every take requires a lapsed,
 * free or own lease — on a running or compensating run, or on a reservation that lapsed after its
 * wake time (its holder was past the wake and may have died in the step after the sleep before its
 * resuming claim committed). A free lease (released, or a sleeper's), a reservation that lapsed
 * before its wake time, the holder's own and a lease a graceful stop left to lapse (its owner ends
 * with STOPPED_OWNER_SUFFIX, see leaveToLease) are no recovery. A claim that reserves never counts:
 * the reservation it replaces lapsed before the wake time still ahead of it.
 */
const countRecovery = (r: string, owner: string): string =>
  `${r}recoveries + CASE WHEN ${r}lease_owner IS NOT NULL AND ${r}lease_owner <> ${owner} AND ${r}lease_expires_at IS NOT NULL
     AND ${r}lease_owner NOT LIKE '%${STOPPED_OWNER_SUFFIX}'
     AND (${r}status IN ('running', 'compensating') OR (${r}status = 'sleeping' AND ${r}wake_at < ${r}lease_expires_at))
     THEN 1 ELSE 0 END`;

/**
 * A take by id. `prev` is the row as the take locked it (FOR UPDATE: the version the UPDATE applies
 * to, not the statement's snapshot), so the result says whom a recovery took the run from.
 */
const takeSql = (s: string, inFlightOnly = false): string => `
WITH prev AS (SELECT lease_owner AS prev_owner, recoveries AS prev_recoveries FROM ${s}.runs WHERE id = $1 FOR UPDATE)
UPDATE ${s}.runs
SET status = ${keepCompensating}, wake_at = NULL, lease_owner = $2, lease_expires_at = $3::bigint + $4::bigint, updated_at = $3,
    recoveries = ${countRecovery("", "$2")}
FROM prev
WHERE id = $1 AND status IN ('running', ${inFlightOnly ? "" : "'sleeping', "}'compensating')
  AND (lease_owner IS NULL OR lease_expires_at IS NULL OR lease_expires_at <= $3 OR lease_owner = $2)
RETURNING ${s}.runs.*, prev.prev_owner, prev.prev_recoveries`;

/** A take's row with the lease owner and recovery count it found (see takeSql, claimedWithJournal). */
type TakenRow = RunRow & { prev_owner: string | null; prev_recoveries: number };

/** AcquiredRun.recoveredFrom of a taken row: the previous holder when the take counted a recovery. */
const recoveredFrom = (r: TakenRow): { recoveredFrom?: string } => {
  const from = recoveredFromRule({ recoveries: r.prev_recoveries, leaseOwner: r.prev_owner }, r);
  return from === undefined ? {} : { recoveredFrom: from };
};

/** Why a fenced write or a take touched no row: missing, terminal, or held by someone else. */
export async function refusal(ctx: PgContext, runId: string, terminalIsBusy: boolean): Promise<Error> {
  const { rows } = await q<{ status: RunStatus }>(
    ctx.pool,
    `SELECT status FROM ${ctx.s}.runs WHERE id = $1`,
    [runId],
  );
  const status = rows[0]?.status;
  if (status === undefined) return storeErrors.runNotFound(runId);
  if (!terminalIsBusy && (status === "completed" || status === "failed"))
    return storeErrors.runTerminal(runId, status);
  return new JournalLeaseBusy(runId);
}

async function entriesOf(ctx: PgContext, runIds: readonly string[]): Promise<Map<string, JournalEntry[]>> {
  const out = new Map<string, JournalEntry[]>(runIds.map((id) => [id, []]));
  if (runIds.length === 0) return out;
  const { rows } = await q<EntryRow>(
    ctx.pool,
    `SELECT * FROM ${ctx.s}.journal_entries WHERE run_id = ANY($1::text[]) ORDER BY run_id, seq`,
    [runIds],
  );
  for (const r of rows) out.get(r.run_id)?.push(toJournalEntry(r));
  return out;
}

export async function acquireRun(ctx: PgContext, req: AcquireRequest): Promise<AcquiredRun> {
  const { rows } = await q<TakenRow>(ctx.pool, takeSql(ctx.s, req.inFlightOnly === true), [
    req.runId,
    req.owner,
    req.now,
    req.leaseMs,
  ]);
  if (rows[0] === undefined) throw await refusal(ctx, req.runId, false);
  const entries = await entriesOf(ctx, [req.runId]);
  return {
    run: toRunRecord(rows[0]),
    entries: entries.get(req.runId) ?? [],
    created: false,
    ...recoveredFrom(rows[0]),
  };
}

/**
 * RunRow's columns, named: a prepared statement's result type is fixed when it
 * is prepared, so `RETURNING *` would fail on every connection that prepared it
 * once a later migration adds a column (a rolling deploy).
 */
export const runColumns =
  "id, flow, status, input, output, error, parent_run_id, lease_owner, lease_expires_at, wake_at, recoveries, created_at, updated_at, stepped_at";

export async function startRun(ctx: PgContext, req: StartRun): Promise<AcquiredRun> {
  // Prepared: a one-row INSERT … VALUES (its conflict check is always the primary key) has no plan
  // to choose (see preparedName). The UPDATEs by primary key do — a sequential scan while the table
  // is a page or two — so they stay unprepared (see claimDueByIdSql).
  const sql = `INSERT INTO ${ctx.s}.runs (id, flow, status, input, parent_run_id, lease_owner, lease_expires_at, created_at, updated_at)
     VALUES ($1, $2, 'running', $3::json, $4, $5, $6::bigint + $7::bigint, $6, $6)
     ON CONFLICT (id) DO NOTHING
     RETURNING ${runColumns}`;
  const { rows } = await q<RunRow>(
    ctx.pool,
    sql,
    [req.id, req.flow, jsonParam(req.input), req.parentRunId, req.owner, req.now, req.leaseMs],
    preparedName("start1", sql),
  );
  if (rows[0] !== undefined) return { run: toRunRecord(rows[0]), entries: [], created: true };
  return acquireRun(ctx, { runId: req.id, owner: req.owner, now: req.now, leaseMs: req.leaseMs });
}

export async function renewLease(ctx: PgContext, req: LeaseReq): Promise<void> {
  const { rowCount } = await q(
    ctx.pool,
    `UPDATE ${ctx.s}.runs SET lease_expires_at = $3::bigint + $4::bigint, stepped_at = $3
     WHERE id = $1 AND status IN ('running', 'compensating') AND lease_owner = $2`,
    [req.runId, req.owner, req.now, req.leaseMs],
  );
  if (rowCount === 0) throw await refusal(ctx, req.runId, true);
}

/**
 * The release's note as a jsonb parameter: SQL NULL (not JSON null) when it has none. Its `since`
 * and `at` are settled in SQL (journal-rules holdOf), against the row's kept note and journal.
 */
const heldParam = (req: ReleaseRequest): string | null =>
  req.hold === undefined ? null : JSON.stringify({ code: req.hold.code, message: req.hold.message });

/**
 * journal-rules holdOf in SQL, for releaseRun's SET ($1 the run, $3 now, $7 the reason or NULL): the
 * first `since` stays while the reason and the journal's length are those of the kept note. The
 * journal count runs only for a release with a reason (a held-back run's retry, not a hot path).
 */
const keptHoldSql = (ctx: PgContext): string =>
  `CASE WHEN $7::jsonb IS NULL THEN NULL ELSE (
     SELECT $7::jsonb || jsonb_build_object('at', n.at, 'since',
       CASE WHEN held->>'code' = $7::jsonb->>'code' AND held->>'message' = $7::jsonb->>'message'
                 AND held->'at' = to_jsonb(n.at) THEN held->'since' ELSE to_jsonb($3::bigint) END)
     FROM (SELECT count(*) AS at FROM ${ctx.s}.journal_entries WHERE run_id = $1) n) END`;

/** Releases the lease if `owner` holds it; a non-holder changes nothing. */
export async function releaseRun(ctx: PgContext, req: ReleaseRequest): Promise<void> {
  // With retryAt: due then, like an expired lease (claimDueRuns, nextWakeAt); other instances are told.
  const { rowCount } = await q(
    ctx.pool,
    `WITH r AS (
       UPDATE ${ctx.s}.runs
       SET lease_owner = NULL, updated_at = $3, held = ${keptHoldSql(ctx)},
           lease_expires_at = CASE WHEN status IN ('running', 'compensating') THEN $4::bigint ELSE NULL END
       WHERE id = $1 AND lease_owner = $2
       RETURNING id)
     SELECT r.id, (SELECT count(*) FROM (SELECT pg_notify($5, $6) WHERE $6::text IS NOT NULL) n) AS notified
     FROM r WHERE $4::bigint IS NOT NULL`,
    [
      req.runId,
      req.owner,
      req.now,
      req.retryAt ?? null,
      ctx.channel,
      wakePayload(ctx, { w: 1 }),
      heldParam(req),
    ],
  );
  if (rowCount > 0) ctx.emit([{ kind: "wake" }]);
}

/**
 * A graceful stop leaves runs to their leases (wake-rules leaveState): one UPDATE for the batch. A
 * run still held by its owner gets the stopped owner, its expiry kept; one left so already (a retry)
 * is reported again and keeps its values.
 */
export async function leaveToLease(ctx: PgContext, req: LeaveToLeaseRequest): Promise<string[]> {
  const runs = [...new Map(req.runs.map((r) => [r.runId, r.owner])).entries()];
  if (runs.length === 0) return [];
  const { rows } = await q<{ id: string }>(
    ctx.pool,
    `UPDATE ${ctx.s}.runs r
     SET lease_owner = x.left_owner, updated_at = CASE WHEN r.lease_owner = x.left_owner THEN r.updated_at ELSE $4 END
     FROM unnest($1::text[], $2::text[], $3::text[]) AS x(id, owner, left_owner)
     WHERE r.id = x.id AND r.status IN ('running', 'compensating') AND r.lease_owner IN (x.owner, x.left_owner)
     RETURNING r.id`,
    [runs.map(([id]) => id), runs.map(([, o]) => o), runs.map(([, o]) => stoppedOwner(o)), req.now],
  );
  const left = new Set(rows.map((r) => r.id));
  return runs.map(([id]) => id).filter((id) => left.has(id));
}

/** A claimed run's row joined with one of its journal entries (e_seq NULL: a run without entries). */
type ClaimedRow = TakenRow & {
  due_at: number;
  moved: boolean;
  e_seq: number | null;
  e_kind: string | null;
  e_name: string | null;
  e_value: unknown;
  e_error: unknown;
  e_duration: string | null;
  e_wake_at: number | null;
  e_at: number | null;
};

/**
 * Runs that need an owner, earliest deadline first (ties by id): sleepers
 * whose wake_at passed, and running runs whose lease expired without being
 * released (a dead instance's). One statement, which also returns the
 * claimed runs' journal (one row per entry, through the journal's primary
 * key): a wake is one round trip. The join reads the statement's snapshot, so
 * a run whose row was written after it (a slow holder's append that committed
 * just before the claim locked the row, which PostgreSQL re-checks and takes)
 * comes back flagged `moved` and its entries are read again after the claim
 * (a rare path: a claim that nothing raced never takes it;
 * postgres-claim-snapshot.test.ts makes the race certain). SKIP LOCKED lets instances
 * claim disjoint batches, and a run acquired meanwhile fails the recheck.
 * With `flows`, only runs of those flows, probed through the (flow, deadline)
 * indexes of migration 0011 so others' due runs are never read.
 */
export async function claimDueRuns(ctx: PgContext, req: ClaimDueRunsRequest): Promise<AcquiredRun[]> {
  if (req.max <= 0 || req.flows?.length === 0 || req.runIds?.length === 0) return [];
  const byId = req.runIds === undefined ? undefined : claimDueByIdSql(ctx.s);
  const dueBy = Math.max(req.now, req.sleepersDueBy ?? req.now);
  const { rows } = await q<ClaimedRow>(
    ctx.pool,
    byId ?? claimDueSql(ctx.s, req.flows !== undefined),
    req.runIds !== undefined
      ? [
          req.owner,
          req.now,
          req.max,
          req.leaseMs,
          [...new Set(req.runIds)],
          req.flows ? [...req.flows] : null,
          dueBy,
        ]
      : req.flows === undefined
        ? [req.owner, req.now, req.max, req.leaseMs, dueBy]
        : // One LATERAL probe per flow name: a name given twice would fill the batch with its runs twice.
          [req.owner, req.now, req.max, req.leaseMs, dueBy, [...new Set(req.flows)]],
  );
  const out = new Map<string, AcquiredRun>();
  const moved: string[] = [];
  for (const r of rows) {
    let acquired = out.get(r.id);
    if (acquired === undefined) {
      acquired = {
        run: toRunRecord(r),
        entries: [],
        created: false,
        dueAt: Number(r.due_at),
        ...recoveredFrom(r),
      };
      out.set(r.id, acquired);
      if (r.moved) moved.push(r.id);
    }
    if (r.e_seq === null) continue;
    acquired.entries.push(
      toJournalEntry({
        run_id: r.id,
        seq: r.e_seq,
        kind: r.e_kind!,
        name: r.e_name!,
        value: r.e_value,
        error: r.e_error,
        duration: r.e_duration,
        wake_at: r.e_wake_at,
        at: r.e_at!,
      }),
    );
  }
  // Written after the claim's snapshot (see claimedWithJournal): read again, now that the claim has
  // committed. A write of the former holder that comes later is refused by its fence.
  if (moved.length > 0)
    for (const [id, entries] of await entriesOf(ctx, moved)) out.get(id)!.entries = entries;
  return [...out.values()];
}

/**
 * A claim of a sleeper not yet due (claimed ahead under sleepersDueBy) reserves it: the lease is
 * taken, the run stays sleeping with its wake_at. Its holder's own later claim resumes it.
 */
const reserve = "(r.status = 'sleeping' AND r.wake_at > $2 AND r.lease_owner IS DISTINCT FROM $1)";

/**
 * What a due row carries of the row its scan locked, for the result: the lease owner and recovery
 * count before the claim (AcquiredRun.recoveredFrom).
 */
const held = "lease_owner AS prev_owner, recoveries AS prev_recoveries";

/** A sleeper free to claim: no reservation, a lapsed one, or the claimer's own. */
const freeSleeper =
  "(lease_owner IS NULL OR lease_expires_at IS NULL OR lease_expires_at <= $2 OR lease_owner = $1)";

/**
 * What claimDueSql and claimDueByIdSql share after their `due` CTE: the claim
 * of the due rows and the claimed runs joined to their entries, ordered by
 * deadline, id, seq. `moved`: the row the claim locked is not the version its
 * snapshot reads (a write committed in between), so the joined entries may
 * miss that write. A run's row repeats once per entry; its input, output and
 * error (up to 1 MiB each) travel on the first row only, which is the one the
 * driver reads them from.
 */
function claimedWithJournal(s: string): string {
  return `claimed AS (
       UPDATE ${s}.runs r
       SET status = CASE WHEN r.status = 'compensating' THEN r.status WHEN ${reserve} THEN 'sleeping' ELSE 'running' END,
           wake_at = CASE WHEN ${reserve} THEN r.wake_at END, lease_owner = $1, lease_expires_at = $2::bigint + $4::bigint, updated_at = $2,
           recoveries = ${countRecovery("r.", "$1")}
       FROM due WHERE r.id = due.id
       RETURNING r.*, due.due_at, due.prev_owner, due.prev_recoveries,
                 due.locked IS DISTINCT FROM (SELECT o.ctid FROM ${s}.runs o WHERE o.id = r.id) AS moved)
     SELECT c.id, c.flow, c.status, c.parent_run_id, c.lease_owner, c.lease_expires_at, c.wake_at,
            c.recoveries, c.created_at, c.updated_at, c.stepped_at, c.due_at, c.moved, c.prev_owner, c.prev_recoveries,
            CASE WHEN e.seq IS NULL OR e.seq = min(e.seq) OVER (PARTITION BY c.id) THEN c.input END AS input,
            CASE WHEN e.seq IS NULL OR e.seq = min(e.seq) OVER (PARTITION BY c.id) THEN c.output END AS output,
            CASE WHEN e.seq IS NULL OR e.seq = min(e.seq) OVER (PARTITION BY c.id) THEN c.error END AS error,
            e.seq AS e_seq, e.kind AS e_kind, e.name AS e_name, e.value AS e_value, e.error AS e_error,
            e.duration AS e_duration, e.wake_at AS e_wake_at, e.at AS e_at
     FROM claimed c LEFT JOIN ${s}.journal_entries e ON e.run_id = c.id
     ORDER BY c.due_at, c.id COLLATE "C", e.seq`;
}

/**
 * The claim of claimDueRuns and the claimed runs' entries, ordered by deadline, id, seq.
 *
 * The due rows come from two locking scans, each stopping at `max` rows, merged and cut to `max`:
 * - sleepers, per flow (a LATERAL probe for each of `$6`), in (wake_at, id) order straight from
 *   runs_wake_flow_id (migration 0027), so a claim reads about `max` rows however many are due;
 * - lapsed leases of running and compensating runs: the runs in flight, bounded by the fleet's
 *   durable.concurrency and not indexed on their lease (appends stay HOT, migration 0021), so
 *   they are read and sorted whole.
 * One scan with an OR of the three (as before 0027) was a BitmapOr that fetched and sorted every
 * due sleeper for each claim: 230 ms a claim with 100 000 due of 1 000 000 parked, 0.5 ms now
 * (EXPLAIN ANALYZE; bench/README.md, S13). Rows a scan locked beyond the final cut stay locked to
 * others (SKIP LOCKED) only until this statement commits.
 * Without `byFlow` (callers other than a scheduler, which always names its flows) the sleepers are
 * one scan across flows, sorted whole: correct, not the hot path.
 */
export function claimDueSql(s: string, byFlow: boolean): string {
  const sleeping = `status = 'sleeping' AND wake_at <= $5::bigint AND ${freeSleeper}
         ORDER BY wake_at, id COLLATE "C" LIMIT $3 FOR UPDATE SKIP LOCKED`;
  const sleepers = byFlow
    ? `SELECT x.* FROM unnest($6::text[]) AS f(name) CROSS JOIN LATERAL (
         SELECT id, wake_at AS due_at, ctid AS locked, ${held} FROM ${s}.runs
         WHERE flow = f.name AND ${sleeping}) x`
    : `SELECT * FROM (
         SELECT id, wake_at AS due_at, ctid AS locked, ${held} FROM ${s}.runs
         WHERE ${sleeping}) x`;
  return `WITH due AS (
       SELECT id, due_at, locked, prev_owner, prev_recoveries FROM (
         ${sleepers}
         UNION ALL
         SELECT * FROM (
           SELECT id, lease_expires_at AS due_at, ctid AS locked, ${held} FROM ${s}.runs
           WHERE ${byFlow ? "flow = ANY($6::text[]) AND" : ""} status IN ('running', 'compensating') AND lease_expires_at <= $2
           ORDER BY lease_expires_at, id COLLATE "C" LIMIT $3 FOR UPDATE SKIP LOCKED) y
       ) u
       ORDER BY due_at, id COLLATE "C"
       LIMIT $3),
     ${claimedWithJournal(s)}`;
}

/**
 * claimDueRuns among given ids: the same eligibility, order and result rows as
 * claimDueSql, found through the primary key: a smaller statement than the
 * deadline-index scan (~0.7 against ~1.4 ms a round trip unprepared, measured
 * on the shared box). This is the claim on the wake path of a run its own
 * instance parked. Not prepared: a generic plan made while `runs` held a page
 * or two is a sequential scan, and it stays one on every connection that
 * prepared it until an ANALYZE invalidates it (measured: an UPDATE by primary
 * key prepared on 3 rows took 20–39 ms once another session had added
 * 200 000). Only statements with no plan to choose are prepared.
 */
export function claimDueByIdSql(s: string): string {
  const among = `FROM ${s}.runs WHERE id = ANY($5::text[]) AND ($6::text[] IS NULL OR flow = ANY($6::text[]))`;
  const order = `ORDER BY due_at, id COLLATE "C" LIMIT $3`;
  return `WITH due AS (
       SELECT id, due_at, locked, prev_owner, prev_recoveries FROM (
         SELECT * FROM (
           SELECT id, CASE WHEN status = 'sleeping' THEN wake_at ELSE lease_expires_at END AS due_at, ctid AS locked, ${held}
           ${among}
             AND ((status = 'sleeping' AND wake_at <= $7::bigint AND ${freeSleeper} AND lease_owner IS DISTINCT FROM $1)
                  OR (status IN ('running', 'compensating') AND lease_expires_at <= $2))
           ${order} FOR UPDATE SKIP LOCKED) other
         UNION ALL
         -- The claimer's own reservation waits for a row lock instead of skipping it: nobody else
         -- claims it while it is live, and the lock is a wake early's UPDATE (or a release's) that
         -- commits at once. Skipped, the claim came back empty and its holder, already running the
         -- code after the sleep, saw its writes refused: that code ran again after the lease lapsed.
         SELECT * FROM (
           SELECT id, wake_at AS due_at, ctid AS locked, ${held}
           ${among} AND status = 'sleeping' AND wake_at <= $7::bigint AND lease_owner = $1
           ${order} FOR UPDATE) own
       ) u
       ${order}),
     ${claimedWithJournal(s)}`;
}

/**
 * Running and compensating runs whose lease is gone, then every sleeping run (sleepers hold no
 * lease); of `flows` if given. Two scans, each cut at `limit`, then merged: the runs in flight
 * (few), and the sleepers in (created_at, id) order from runs_page, so the boot's orphan scan —
 * one page, of which it wants the running runs — reads a page of sleepers, not all of them. As one
 * scan with an OR, it was a parallel sequential scan of the table and a sort: 1.0 s per page with
 * 1 000 000 parked (EXPLAIN ANALYZE), on every instance's boot.
 */
export async function listOrphans(
  ctx: PgContext,
  now: number,
  limit?: number,
  filter: RunFlowFilter = {},
): Promise<RunRecord[]> {
  if (filter.flows?.length === 0) return [];
  const cut = "LIMIT CASE WHEN $2::bigint IS NULL THEN NULL ELSE GREATEST($2::bigint, 0) END";
  const mine = "($3::text[] IS NULL OR flow = ANY($3::text[]))";
  const { rows } = await q<RunRow>(
    ctx.pool,
    `SELECT * FROM (
       (SELECT * FROM ${ctx.s}.runs
        WHERE status IN ('running', 'compensating')
          AND (lease_owner IS NULL OR lease_expires_at IS NULL OR lease_expires_at <= $1) AND ${mine}
        ORDER BY created_at, id COLLATE "C" ${cut})
       UNION ALL
       (SELECT * FROM ${ctx.s}.runs WHERE status = 'sleeping' AND ${mine}
        ORDER BY created_at, id COLLATE "C" ${cut})
     ) o
     ORDER BY status = 'sleeping', created_at, id COLLATE "C"
     ${cut}`,
    [now, limit ?? null, filter.flows === undefined ? null : [...filter.flows]],
  );
  return rows.map(toRunRecord);
}

/** A bound above every deadline (bigint max), for a comparison with no free sleeper. */
const NO_DEADLINE = "9223372036854775807";

/**
 * How many sleepers nextWakeAt reads in wake order for reservations (up to the first free sleeper's
 * wake time). The cut lets the planner walk runs_wake_flow_id in order: as an open range ending at
 * a subquery's value it was a sequential scan of the table (205 ms with 1 000 000 parked) or, on
 * 0011's index, a read of every sleeper due at one instant (100 ms with a cohort of 100 000), at
 * every arm of every scheduler. Reservations are the lookahead's few (bounded by the fleet's
 * permits); one the cut misses is found when the scheduler next scans — the arm at the first free
 * sleeper's time, or its poll.
 */
const RESERVED_READ = 1_024;

/**
 * Earliest deadline: a sleeper's wake_at or a running run's lease expiry; among `flows` if given (index
 * probes per flow). A reserved sleeper (its lease taken ahead of its wake) is due to others once its
 * lease lapses too: read among the sleepers before the first free one only (the few in a lookahead;
 * at most RESERVED_READ of them).
 */
export async function nextWakeAt(ctx: PgContext, filter: RunFlowFilter = {}): Promise<number | null> {
  if (filter.flows?.length === 0) return null;
  const perFlow = filter.flows !== undefined;
  const flowIs = perFlow ? "flow = f.name AND" : "";
  const sleepers = `(SELECT LEAST(u.at, (SELECT min(GREATEST(wake_at, lease_expires_at)) FROM (
           SELECT wake_at, lease_expires_at, lease_owner FROM ${ctx.s}.runs
           WHERE ${flowIs} status = 'sleeping' AND wake_at <= coalesce(u.at, ${NO_DEADLINE})
           ORDER BY wake_at, id COLLATE "C" LIMIT ${RESERVED_READ}) r
         WHERE lease_owner IS NOT NULL))
       FROM (SELECT min(wake_at) AS at FROM ${ctx.s}.runs WHERE ${flowIs} status = 'sleeping' AND lease_owner IS NULL) u)`;
  if (perFlow) {
    const { rows } = await q<{ at: number | null }>(
      ctx.pool,
      `SELECT min(LEAST(
         ${sleepers},
         (SELECT lease_expires_at FROM ${ctx.s}.runs WHERE flow = f.name AND status = 'running' AND lease_expires_at IS NOT NULL ORDER BY flow, lease_expires_at LIMIT 1),
         (SELECT lease_expires_at FROM ${ctx.s}.runs WHERE flow = f.name AND status = 'compensating' AND lease_expires_at IS NOT NULL ORDER BY flow, lease_expires_at LIMIT 1))) AS at
       FROM unnest($1::text[]) AS f(name)`,
      [[...new Set(filter.flows)]],
    );
    return rows[0]?.at ?? null;
  }
  const { rows } = await q<{ at: number | null }>(
    ctx.pool,
    `SELECT LEAST(${sleepers},
                  (SELECT min(lease_expires_at) FROM ${ctx.s}.runs WHERE status = 'running'),
                  (SELECT min(lease_expires_at) FROM ${ctx.s}.runs WHERE status = 'compensating')) AS at`,
    [],
  );
  return rows[0]?.at ?? null;
}

export async function wakeEarly(ctx: PgContext, runId: string, now: number): Promise<boolean> {
  const payload = wakePayload(ctx, { w: 1 });
  const { rows } = await q<{ id: string }>(
    ctx.pool,
    `WITH upd AS (
       UPDATE ${ctx.s}.runs SET wake_at = LEAST(coalesce(wake_at, $2), $2), updated_at = $2
       WHERE id = $1 AND status = 'sleeping' RETURNING id),
     n AS (SELECT pg_notify($3, $4) FROM upd WHERE $4::text IS NOT NULL)
     SELECT id, (SELECT count(*) FROM n) AS notified FROM upd`,
    [runId, now, ctx.channel, payload],
  );
  if (rows.length === 0) return false;
  ctx.emit([{ kind: "wake" }]);
  return true;
}

/**
 * An operator ends the run for good: one UPDATE fenced like a take (takeSql: no holder, or a lapsed
 * lease — a sleeper's reservation included), so a holder racing it either wins its row lock first
 * and the terminate finds it held, or finds the run failed and its write refused. Only when it did
 * not apply, a read says why. A run a holder let go of between the two is tried again.
 */
export async function terminateRun(ctx: PgContext, req: TerminateRequest): Promise<TerminateOutcome> {
  const error = JSON.stringify({ code: req.error.code, message: req.error.message });
  for (let attempt = 0; attempt < 3; attempt++) {
    const { rows } = await q<RunRow>(
      ctx.pool,
      `UPDATE ${ctx.s}.runs
       SET status = 'failed', error = $3::jsonb, lease_owner = NULL, lease_expires_at = NULL, wake_at = NULL, updated_at = $2
       WHERE id = $1 AND status IN ('running', 'sleeping', 'compensating')
         AND (lease_owner IS NULL OR lease_expires_at IS NULL OR lease_expires_at <= $2)
       RETURNING *`,
      [req.runId, req.now, error],
    );
    if (rows[0] !== undefined) return { outcome: "terminated", run: toRunRecord(rows[0]) };
    // Why not, by the rule the other drivers apply (journal-rules terminateState).
    const run = await getRun(ctx, req.runId);
    if (run === undefined) return { outcome: "missing" };
    const d = terminateState(run, req.now);
    if ("refused" in d) return d.refused;
  }
  // Let go of and taken again three times over: someone is working it; the operator may ask again.
  throw new JournalLeaseBusy(req.runId);
}

export async function getRun(ctx: PgContext, runId: string): Promise<RunRecord | undefined> {
  const { rows } = await q<RunRow>(ctx.pool, `SELECT * FROM ${ctx.s}.runs WHERE id = $1`, [runId]);
  return rows[0] === undefined ? undefined : toRunRecord(rows[0]);
}

export async function getJournal(ctx: PgContext, runId: string): Promise<JournalEntry[]> {
  return (await entriesOf(ctx, [runId])).get(runId) ?? [];
}

/**
 * A journal's ends in one statement (one snapshot): the count, then two range scans of the
 * (run_id, seq) key each stopped by its LIMIT, so a 20 000-entry run's middle is neither read nor
 * sent (the Console's timeline asked for all of it every 2 s). A journal no longer than
 * head + tail comes whole in the first part.
 */
export async function getJournalEnds(
  ctx: PgContext,
  runId: string,
  head: number,
  tail: number,
): Promise<JournalEnds> {
  const h = wholeCount(head);
  const t = wholeCount(tail);
  const { rows } = await q<EntryRow & { part: number | null; total: string }>(
    ctx.pool,
    `WITH n AS (SELECT count(*) AS c FROM ${ctx.s}.journal_entries WHERE run_id = $1),
     ends AS (
       (SELECT e.*, 1 AS part FROM ${ctx.s}.journal_entries e
        WHERE e.run_id = $1 ORDER BY e.seq
        LIMIT (SELECT CASE WHEN c <= $2::bigint + $3::bigint THEN c ELSE $2::bigint END FROM n))
       UNION ALL
       (SELECT e.*, 2 AS part FROM ${ctx.s}.journal_entries e
        WHERE e.run_id = $1 AND (SELECT c FROM n) > $2::bigint + $3::bigint ORDER BY e.seq DESC
        LIMIT $3::bigint))
     -- The left join keeps the count when neither end has a row (a 0 and 0 read).
     SELECT ends.*, n.c AS total FROM n LEFT JOIN ends ON true`,
    [runId, h, t],
  );
  const ends: JournalEnds = { head: [], tail: [], count: Number(rows[0]?.total ?? 0) };
  for (const r of rows) if (r.part !== null) (r.part === 1 ? ends.head : ends.tail).push(toJournalEntry(r));
  // Each part was ordered to be limited; the union and the join keep no order of their own.
  ends.head.sort((a, b) => a.seq - b.seq);
  ends.tail.sort((a, b) => a.seq - b.seq);
  return ends;
}

/** Matching runs, oldest first (createdAt, then id). */
export async function listRuns(
  ctx: PgContext,
  filter: { status?: RunStatus; flow?: string; limit?: number },
): Promise<RunRecord[]> {
  const { rows } = await q<RunRow>(
    ctx.pool,
    `SELECT * FROM ${ctx.s}.runs
     WHERE ($1::text IS NULL OR status = $1) AND ($2::text IS NULL OR flow = $2)
     ORDER BY created_at, id COLLATE "C"
     LIMIT CASE WHEN $3::bigint IS NULL THEN NULL ELSE GREATEST($3::bigint, 0) END`,
    [filter.status ?? null, filter.flow ?? null, filter.limit ?? null],
  );
  return rows.map(toRunRecord);
}
