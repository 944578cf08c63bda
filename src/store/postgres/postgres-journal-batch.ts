import type { AcquiredRun, AppendRequest, FinishRequest, StartRun } from "../types.ts";
import { type PgContext, q } from "./postgres-context.ts";
import { append, finish } from "./postgres-journal-write.ts";
import { entryRecords, jsonParam, type RunRow, toRunRecord } from "./postgres-rows.ts";
import { acquireRun, refusal, startRun } from "./postgres-runs.ts";

interface Waiter<R, T = void> {
  req: R;
  resolve: (value: T) => void;
  reject: (e: unknown) => void;
}

interface Lane<R, T = void> {
  waiting: Waiter<R, T>[];
  inFlight: number;
}

/**
 * Statements in flight at once. Appends of one run are serial (its flow awaits
 * each), so parallel statements never reorder a run's entries; two keep both
 * cores busy while batches form behind them.
 */
const MAX_IN_FLIGHT = 2;
const appendLanes = new WeakMap<PgContext, Lane<AppendRequest>>();
const finishLanes = new WeakMap<PgContext, Lane<FinishRequest>>();
const startLanes = new WeakMap<PgContext, Lane<StartRun, AcquiredRun>>();

/** Queues `req` on its lane and starts a statement if one may go out. */
function enqueue<R, T = void>(
  lanes: WeakMap<PgContext, Lane<R, T>>,
  ctx: PgContext,
  req: R,
  flush: (ctx: PgContext, batch: Waiter<R, T>[]) => Promise<void>,
): Promise<T> {
  let lane = lanes.get(ctx);
  if (!lane) {
    lane = { waiting: [], inFlight: 0 };
    lanes.set(ctx, lane);
  }
  const promise = new Promise<T>((resolve, reject) => lane.waiting.push({ req, resolve, reject }));
  pump(ctx, lane, flush);
  return promise;
}

function pump<R, T>(
  ctx: PgContext,
  lane: Lane<R, T>,
  flush: (ctx: PgContext, batch: Waiter<R, T>[]) => Promise<void>,
): void {
  while (lane.inFlight < MAX_IN_FLIGHT && lane.waiting.length > 0) {
    const batch = lane.waiting.splice(0, lane.waiting.length);
    lane.inFlight++;
    void flush(ctx, batch).finally(() => {
      lane.inFlight--;
      pump(ctx, lane, flush);
    });
  }
}

/**
 * Group commit for journal appends: steps of many concurrent runs that finish
 * while a statement is in flight share the next one — one fenced UPDATE of
 * their run rows and one INSERT of their entries, in one commit. Each caller
 * still resolves only after its entries committed, so a completed step is as
 * durable as before. A lone append goes out at once (and through the one-run
 * statement), so sequential latency is unchanged. Appends carrying emits take
 * that statement too: they hold the outbox's NOTIFY.
 *
 * Why: 32 runs of three steps at a time spent most of their time in per-
 * statement work (parse, plan, commit) on a 2-core box — bench S9.
 */
export function appendGrouped(ctx: PgContext, req: AppendRequest): Promise<void> {
  if ((req.emits?.length ?? 0) > 0) return append(ctx, req);
  return enqueue(appendLanes, ctx, req, flushAppends);
}

/**
 * Group commit for finishes, the same way: runs of many concurrent flows that
 * complete while a statement is in flight share one fenced UPDATE.
 */
export function finishGrouped(ctx: PgContext, req: FinishRequest): Promise<void> {
  return enqueue(finishLanes, ctx, req, flushFinishes);
}

/**
 * And for new runs: runs started while a statement is in flight share one
 * multi-row INSERT. A run id that already exists takes the one-run path
 * (acquireRun), exactly as startRun does.
 */
export function startRunGrouped(ctx: PgContext, req: StartRun): Promise<AcquiredRun> {
  return enqueue(startLanes, ctx, req, flushStarts);
}

/**
 * The batch statement: `input` holds one row per append (a run's own appends
 * are serial, but a stale holder's may meet the current holder's). The
 * ANY (ARRAY(subquery)) keeps the runs primary key: the planner sizes it at 10
 * rows whatever the batch.
 */
const batchSql = (s: string): string => `
WITH input AS (
  SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[]) AS x(run_id, owner, now, lease_ms)
),
run AS (
  UPDATE ${s}.runs r
  SET updated_at = i.now,
      lease_expires_at = CASE WHEN i.lease_ms IS NULL THEN r.lease_expires_at ELSE i.now + i.lease_ms END
  FROM input i
  WHERE r.id = ANY (ARRAY(SELECT run_id FROM input))
    AND r.id = i.run_id AND r.status = 'running' AND r.lease_owner = i.owner
  RETURNING r.id, r.lease_owner
),
entries AS (
  -- Fenced by (run, owner), not run alone: a stale holder's append may share a batch with
  -- the current holder's.
  INSERT INTO ${s}.journal_entries (run_id, seq, kind, name, value, error, duration, wake_at, at)
  SELECT e.run_id, e.seq, e.kind, e.name, e.value -> 'v', e.error, e.duration, e.wake_at, e.at
  FROM jsonb_to_recordset($5::jsonb)
    AS e(run_id text, owner text, seq integer, kind text, name text, value jsonb, error jsonb,
         duration text, wake_at bigint, at bigint)
  WHERE (e.run_id, e.owner) IN (SELECT id, lease_owner FROM run)
  RETURNING 1
)
SELECT (SELECT coalesce(array_agg(id || ' ' || lease_owner), '{}') FROM run) AS fenced_in,
       (SELECT count(*) FROM entries) AS written`;

async function flushAppends(ctx: PgContext, batch: Waiter<AppendRequest>[]): Promise<void> {
  if (batch.length === 1) {
    const w = batch[0]!;
    await append(ctx, w.req).then(w.resolve, w.reject);
    return;
  }
  const entries = batch.flatMap((w) =>
    entryRecords(w.req.runId, w.req.entries).map((e) => ({ ...e, owner: w.req.owner })),
  );
  let fencedIn: Set<string>;
  try {
    const { rows } = await q<{ fenced_in: string[] }>(ctx.pool, batchSql(ctx.s), [
      batch.map((w) => w.req.runId),
      batch.map((w) => w.req.owner),
      batch.map((w) => w.req.now),
      batch.map((w) => w.req.leaseMs ?? null),
      JSON.stringify(entries),
    ]);
    fencedIn = new Set(rows[0]?.fenced_in ?? []);
  } catch {
    // One caller's conflict (a duplicate seq) must not fail the others: each alone, with its own error.
    for (const w of batch) await append(ctx, w.req).then(w.resolve, w.reject);
    return;
  }
  for (const w of batch) {
    if (fencedIn.has(`${w.req.runId} ${w.req.owner}`)) w.resolve();
    else await refusal(ctx, w.req.runId, true).then(w.reject, w.reject);
  }
}

/** Like batchSql, for finishes: one fenced UPDATE; RETURNING names each (run, owner) that got in. */
const finishBatchSql = (s: string): string => `
WITH input AS (
  SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[])
    AS x(run_id, owner, now, status, output, error)
),
run AS (
  UPDATE ${s}.runs r
  SET status = i.status, output = i.output::jsonb, error = i.error::jsonb,
      lease_owner = NULL, lease_expires_at = NULL, updated_at = i.now
  FROM input i
  WHERE r.id = ANY (ARRAY(SELECT run_id FROM input))
    AND r.id = i.run_id AND r.status = 'running' AND r.lease_owner = i.owner
  RETURNING r.id, i.owner
)
SELECT coalesce(array_agg(id || ' ' || owner), '{}') AS fenced_in FROM run`;

async function flushFinishes(ctx: PgContext, batch: Waiter<FinishRequest>[]): Promise<void> {
  if (batch.length === 1) {
    const w = batch[0]!;
    await finish(ctx, w.req).then(w.resolve, w.reject);
    return;
  }
  let fencedIn: Set<string>;
  try {
    const { rows } = await q<{ fenced_in: string[] }>(ctx.pool, finishBatchSql(ctx.s), [
      batch.map((w) => w.req.runId),
      batch.map((w) => w.req.owner),
      batch.map((w) => w.req.now),
      batch.map((w) => w.req.status),
      batch.map((w) => jsonParam(w.req.output)),
      batch.map((w) =>
        w.req.error === undefined
          ? null
          : JSON.stringify({ code: w.req.error.code, message: w.req.error.message }),
      ),
    ]);
    fencedIn = new Set(rows[0]?.fenced_in ?? []);
  } catch {
    for (const w of batch) await finish(ctx, w.req).then(w.resolve, w.reject);
    return;
  }
  for (const w of batch) {
    if (fencedIn.has(`${w.req.runId} ${w.req.owner}`)) w.resolve();
    else await refusal(ctx, w.req.runId, true).then(w.reject, w.reject);
  }
}

const startBatchSql = (s: string): string => `
INSERT INTO ${s}.runs (id, flow, status, input, parent_run_id, lease_owner, lease_expires_at, created_at, updated_at)
SELECT x.id, x.flow, 'running', x.input::jsonb, x.parent_run_id, x.owner, x.now + x.lease_ms, x.now, x.now
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::bigint[])
  WITH ORDINALITY AS x(id, flow, input, parent_run_id, owner, now, lease_ms, ord)
ORDER BY x.ord
ON CONFLICT (id) DO NOTHING
RETURNING *`;

async function flushStarts(ctx: PgContext, batch: Waiter<StartRun, AcquiredRun>[]): Promise<void> {
  if (batch.length === 1) {
    const w = batch[0]!;
    await startRun(ctx, w.req).then(w.resolve, w.reject);
    return;
  }
  let created: Map<string, RunRow>;
  try {
    const { rows } = await q<RunRow>(ctx.pool, startBatchSql(ctx.s), [
      batch.map((w) => w.req.id),
      batch.map((w) => w.req.flow),
      batch.map((w) => jsonParam(w.req.input)),
      batch.map((w) => w.req.parentRunId),
      batch.map((w) => w.req.owner),
      batch.map((w) => w.req.now),
      batch.map((w) => w.req.leaseMs),
    ]);
    created = new Map(rows.map((r) => [r.id, r]));
  } catch {
    for (const w of batch) await startRun(ctx, w.req).then(w.resolve, w.reject);
    return;
  }
  for (const w of batch) {
    const row = created.get(w.req.id);
    // The first waiter for an id gets the row it inserted; any other (an existing id) acquires it.
    if (row !== undefined && row.lease_owner === w.req.owner) {
      created.delete(w.req.id);
      w.resolve({ run: toRunRecord(row), entries: [], created: true });
    } else {
      await acquireRun(ctx, {
        runId: w.req.id,
        owner: w.req.owner,
        now: w.req.now,
        leaseMs: w.req.leaseMs,
      }).then(w.resolve, w.reject);
    }
  }
}
