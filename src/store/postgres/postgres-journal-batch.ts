/** Group commit for journal appends, finishes and starts of concurrent runs. */
import { runError } from "../journal-rules.ts";
import type { AcquiredRun, AppendRequest, FinishRequest, StartRun } from "../types.ts";
import { type PgContext, preparedName, q } from "./postgres-context.ts";
import { type BatchOutcome, groupCommit } from "./postgres-group-commit.ts";
import { append, finish } from "./postgres-journal-write.ts";
import { entryRecords, jsonParam, type RunRow, toRunRecord } from "./postgres-rows.ts";
import { acquireRun, refusal, runColumns, startRun } from "./postgres-runs.ts";

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
  return appends(ctx, req);
}

/**
 * Group commit for finishes, the same way: runs of many concurrent flows that
 * complete while a statement is in flight share one fenced UPDATE.
 */
export function finishGrouped(ctx: PgContext, req: FinishRequest): Promise<void> {
  return finishes(ctx, req);
}

/**
 * And for new runs: runs started while a statement is in flight share one
 * multi-row INSERT. A run id that already exists takes the one-run path
 * (acquireRun), exactly as startRun does.
 */
export function startRunGrouped(ctx: PgContext, req: StartRun): Promise<AcquiredRun> {
  return starts(ctx, req);
}

/**
 * Statements in flight at once, per kind. A run's own journal writes are
 * serial (its flow awaits each), so parallel statements never reorder them;
 * two keep both cores busy while batches form behind them.
 */
const MAX_IN_FLIGHT = 2;

/** Each request in, in order: refused ones learn why on their own (status lookup). */
const fencedOutcomes = (
  ctx: PgContext,
  reqs: readonly { runId: string; owner: string }[],
  fencedIn: readonly string[],
): BatchOutcome<void>[] => {
  const ok = new Set(fencedIn);
  return reqs.map((r) =>
    ok.has(`${r.runId} ${r.owner}`)
      ? { value: undefined }
      : { alone: () => refusal(ctx, r.runId, true).then((e) => Promise.reject(e)) },
  );
};

/**
 * The batch statement: one row per append in the arrays (a run's own appends
 * are serial, but a stale holder's may meet the current holder's), the
 * entries as one recordset, fenced by (run, owner). Migration 0018's
 * journal_append_batch (planned once per connection, kept on runs_pkey, see
 * there), called through a prepared statement. Before, the same CTE was sent
 * unprepared and planned per batch.
 */
const batchSql = (s: string): string =>
  `SELECT ${s}.journal_append_batch($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::json) AS fenced_in`;

const appends = groupCommit<AppendRequest, void>({
  what: "journal appends",
  maxInFlight: MAX_IN_FLIGHT,
  single: append,
  async batch(ctx, reqs) {
    const entries = reqs.flatMap((r) =>
      entryRecords(r.runId, r.entries).map((e) => ({ ...e, owner: r.owner })),
    );
    const sql = batchSql(ctx.s);
    const { rows } = await q<{ fenced_in: string[] }>(
      ctx.pool,
      sql,
      [
        reqs.map((r) => r.runId),
        reqs.map((r) => r.owner),
        reqs.map((r) => r.now),
        reqs.map((r) => r.leaseMs ?? null),
        JSON.stringify(entries),
      ],
      preparedName("appendN", sql),
    );
    return fencedOutcomes(ctx, reqs, rows[0]?.fenced_in ?? []);
  },
});

/** Like batchSql, for finishes: migration 0018's run_finish_batch, one fenced UPDATE; it names each (run, owner) that got in. */
const finishBatchSql = (s: string): string =>
  `SELECT ${s}.run_finish_batch($1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[]) AS fenced_in`;

const finishes = groupCommit<FinishRequest, void>({
  what: "run finishes",
  maxInFlight: MAX_IN_FLIGHT,
  single: finish,
  async batch(ctx, reqs) {
    const sql = finishBatchSql(ctx.s);
    const { rows } = await q<{ fenced_in: string[] }>(
      ctx.pool,
      sql,
      [
        reqs.map((r) => r.runId),
        reqs.map((r) => r.owner),
        reqs.map((r) => r.now),
        reqs.map((r) => r.status),
        reqs.map((r) => jsonParam(r.output)),
        reqs.map((r) => (r.error === undefined ? null : JSON.stringify(runError(r.error)))),
      ],
      preparedName("finishN", sql),
    );
    return fencedOutcomes(ctx, reqs, rows[0]?.fenced_in ?? []);
  },
});

/**
 * Prepared by name like the one-run start: an INSERT … SELECT from unnest has
 * no plan to choose (its conflict check is always the primary key). Named
 * columns in RETURNING: a prepared statement's result type is fixed.
 */
const startBatchSql = (s: string): string => `
INSERT INTO ${s}.runs (id, flow, status, input, parent_run_id, lease_owner, lease_expires_at, created_at, updated_at)
SELECT x.id, x.flow, 'running', x.input::json, x.parent_run_id, x.owner, x.now + x.lease_ms, x.now, x.now
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::bigint[])
  WITH ORDINALITY AS x(id, flow, input, parent_run_id, owner, now, lease_ms, ord)
ORDER BY x.ord
ON CONFLICT (id) DO NOTHING
RETURNING ${runColumns}`;

const starts = groupCommit<StartRun, AcquiredRun>({
  what: "run starts",
  maxInFlight: MAX_IN_FLIGHT,
  single: startRun,
  async batch(ctx, reqs) {
    const sql = startBatchSql(ctx.s);
    const { rows } = await q<RunRow>(
      ctx.pool,
      sql,
      [
        reqs.map((r) => r.id),
        reqs.map((r) => r.flow),
        reqs.map((r) => jsonParam(r.input)),
        reqs.map((r) => r.parentRunId),
        reqs.map((r) => r.owner),
        reqs.map((r) => r.now),
        reqs.map((r) => r.leaseMs),
      ],
      preparedName("startN", sql),
    );
    const created = new Map(rows.map((r) => [r.id, r]));
    return reqs.map((r): BatchOutcome<AcquiredRun> => {
      const row = created.get(r.id);
      // The first request for an id gets the row it inserted; any other (an existing id) acquires it.
      if (row !== undefined && row.lease_owner === r.owner) {
        created.delete(r.id);
        return { value: { run: toRunRecord(row), entries: [], created: true } };
      }
      return {
        alone: () => acquireRun(ctx, { runId: r.id, owner: r.owner, now: r.now, leaseMs: r.leaseMs }),
      };
    });
  },
});
