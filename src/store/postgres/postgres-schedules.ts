/** The schedule half of the postgres driver: reconcile, pause/override, and fire as one statement. */
import type pg from "pg";
import { applyOverride, applyPaused, planReconcile } from "../schedule-rules.ts";
import type {
  DeclaredSchedule,
  ReconcileOptions,
  FireRequest,
  ScheduleError,
  ScheduleFire,
  ScheduleRecord,
  ScheduleSpec,
} from "../schedule-types.ts";
import { enqueuedEvents } from "./postgres-enqueue.ts";
import { mapConflict } from "./postgres-errors.ts";
import {
  DB_NOW_MS,
  type PgContext,
  preparedName,
  q,
  type Queryable,
  wakePayload,
} from "./postgres-context.ts";
import { jsonParam } from "./postgres-rows.ts";

interface ScheduleRow {
  name: string;
  declared: ScheduleSpec;
  override: ScheduleSpec | null;
  overridable: boolean;
  flow: string;
  description: string | null;
  paused: boolean;
  orphaned: boolean;
  version: number;
  anchor_at: number;
  last_slot: number | null;
  last_fired_at: number | null;
  last_missed_runs: number;
  last_error: ScheduleError | null;
  created_at: number;
  updated_at: number;
}

const toRecord = (r: ScheduleRow): ScheduleRecord => ({
  name: r.name,
  declared: r.declared,
  override: r.override,
  overridable: r.overridable,
  flow: r.flow,
  description: r.description,
  paused: r.paused,
  orphaned: r.orphaned,
  version: r.version,
  anchorAt: r.anchor_at,
  lastSlot: r.last_slot,
  lastFiredAt: r.last_fired_at,
  lastMissedRuns: r.last_missed_runs,
  lastError: r.last_error,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
});

const COLUMNS =
  "name, declared, override, overridable, flow, description, paused, orphaned, version, anchor_at, last_slot, last_fired_at, last_missed_runs, last_error, created_at, updated_at";

/** Writes whole records (insert or overwrite): the rules were applied in JS under a lock. */
async function upsert(db: Queryable, s: string, records: readonly ScheduleRecord[]): Promise<void> {
  for (const r of records) {
    await q(
      db,
      `INSERT INTO ${s}.schedules (${COLUMNS})
       VALUES ($1, $2::jsonb, $3::jsonb, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14::jsonb, $15, $16)
       ON CONFLICT (name) DO UPDATE SET declared = EXCLUDED.declared, override = EXCLUDED.override,
         overridable = EXCLUDED.overridable, flow = EXCLUDED.flow, description = EXCLUDED.description,
         paused = EXCLUDED.paused, orphaned = EXCLUDED.orphaned, version = EXCLUDED.version,
         anchor_at = EXCLUDED.anchor_at, last_error = EXCLUDED.last_error, updated_at = EXCLUDED.updated_at`,
      [
        r.name,
        jsonParam(r.declared),
        r.override === null ? null : jsonParam(r.override),
        r.overridable,
        r.flow,
        r.description,
        r.paused,
        r.orphaned,
        r.version,
        r.anchorAt,
        r.lastSlot,
        r.lastFiredAt,
        r.lastMissedRuns,
        r.lastError === null ? null : jsonParam(r.lastError),
        r.createdAt,
        r.updatedAt,
      ],
    );
  }
}

/** Runs `fn` in a transaction on one client; a dropped connection is released as broken. */
async function inTx<T>(ctx: PgContext, fn: (c: pg.PoolClient) => Promise<T>): Promise<T> {
  const c = await ctx.pool.connect();
  let broken: Error | undefined;
  const onError = (err: Error): void => {
    broken = err;
  };
  c.on("error", onError);
  try {
    await c.query("BEGIN");
    const out = await fn(c);
    await c.query("COMMIT");
    return out;
  } catch (err) {
    await c.query("ROLLBACK").catch((e: Error) => (broken = e));
    throw err;
  } finally {
    c.off("error", onError);
    c.release(broken);
  }
}

/** Tells every instance to re-read schedules (a pause, an edit, a reconcile). */
async function announce(ctx: PgContext, db: Queryable): Promise<void> {
  const payload = wakePayload(ctx, { w: 1 });
  if (payload !== null) await q(db, "SELECT pg_notify($1, $2)", [ctx.channel, payload]);
}

export async function reconcileSchedules(
  ctx: PgContext,
  declared: readonly DeclaredSchedule[],
  now: number,
  options?: ReconcileOptions,
): Promise<ScheduleRecord[]> {
  const changed = await inTx(ctx, async (c) => {
    // Instances booting together take turns, so each plans against the other's result.
    await q(c, "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", [`okengine:schedules:${ctx.s}`]);
    const { rows } = await q<ScheduleRow>(c, `SELECT * FROM ${ctx.s}.schedules`, []);
    const current = new Map(rows.map((r) => [r.name, toRecord(r)]));
    let plan = planReconcile([...current.values()], declared, now, options);
    // The read above is not locked, and an operator's pause, edit or resume (update() below) may have
    // committed since: writing the plan's copy would undo it and move the version back. So the rows
    // the plan rewrites are locked and read again, and the plan is made again on what they hold.
    const locked = new Set<string>();
    for (;;) {
      const more = plan.map((r) => r.name).filter((n) => current.has(n) && !locked.has(n));
      if (more.length === 0) break;
      const fresh = await q<ScheduleRow>(
        c,
        `SELECT * FROM ${ctx.s}.schedules WHERE name = ANY($1::text[]) ORDER BY name FOR UPDATE`,
        [more],
      );
      for (const r of fresh.rows) current.set(r.name, toRecord(r));
      for (const n of more) locked.add(n);
      plan = planReconcile([...current.values()], declared, now, options);
    }
    await upsert(c, ctx.s, plan);
    if (plan.length > 0) await announce(ctx, c);
    return plan.length;
  });
  if (changed > 0) ctx.emit([{ kind: "wake" }]);
  return listSchedules(ctx);
}

export async function listSchedules(ctx: PgContext): Promise<ScheduleRecord[]> {
  const { rows } = await q<ScheduleRow>(ctx.pool, `SELECT * FROM ${ctx.s}.schedules ORDER BY name`, []);
  return rows.map(toRecord);
}

export async function getSchedule(ctx: PgContext, name: string): Promise<ScheduleRecord | undefined> {
  const { rows } = await q<ScheduleRow>(ctx.pool, `SELECT * FROM ${ctx.s}.schedules WHERE name = $1`, [name]);
  return rows[0] === undefined ? undefined : toRecord(rows[0]);
}

/** Read-modify-write of one schedule under its row lock. */
async function update(
  ctx: PgContext,
  name: string,
  change: (r: ScheduleRecord) => ScheduleRecord,
): Promise<ScheduleRecord | undefined> {
  const out = await inTx(ctx, async (c) => {
    const { rows } = await q<ScheduleRow>(c, `SELECT * FROM ${ctx.s}.schedules WHERE name = $1 FOR UPDATE`, [
      name,
    ]);
    if (rows[0] === undefined) return undefined;
    const before = toRecord(rows[0]);
    const after = change(before);
    if (after !== before) {
      await upsert(c, ctx.s, [after]);
      await announce(ctx, c);
    }
    return after;
  });
  if (out !== undefined) ctx.emit([{ kind: "wake" }]);
  return out;
}

export const setSchedulePaused = (ctx: PgContext, name: string, paused: boolean, now: number) =>
  update(ctx, name, (r) => applyPaused(r, paused, now));

export const overrideSchedule = (ctx: PgContext, name: string, spec: ScheduleSpec | null, now: number) =>
  update(ctx, name, (r) => applyOverride(r, spec, now));

/**
 * One statement: the schedule row's guarded UPDATE → the (clock, slot) INSERT
 * → the message INSERT → NOTIFY, each feeding the next, so nothing is written
 * unless all of it is. A concurrent fire of the same slot blocks on the
 * schedule row, re-checks `last_slot < slot` once it is released (READ
 * COMMITTED re-evaluates the WHERE on the new row version) and matches
 * nothing. Hot when 100 clocks fire each second on 3 instances (bench/clock-lag.ts).
 */
export async function fire(ctx: PgContext, req: FireRequest): Promise<boolean> {
  const m = req.message;
  const notify = wakePayload(ctx, { e: [m.signal] });
  try {
    const { rows } = await q<{ fired: number }>(
      ctx.pool,
      `WITH upd AS (
         UPDATE ${ctx.s}.schedules
         SET last_slot = $2, last_fired_at = $5, last_missed_runs = $4, updated_at = $5
         WHERE name = $1 AND version = $3 AND NOT paused AND NOT orphaned AND $2 > anchor_at
           AND (last_slot IS NULL OR last_slot < $2)
         RETURNING name
       ), rec AS (
         INSERT INTO ${ctx.s}.schedule_fires (clock, slot, fired_at, missed_runs, message_id)
         SELECT name, $2, $5, $4, $6 FROM upd
         ON CONFLICT DO NOTHING
         RETURNING clock
       ), msg AS (
         INSERT INTO ${ctx.s}.messages (id, signal, key, payload, parent_run_id, created_at, updated_at)
         SELECT $6, $7, $8, $9::json, NULL, $5, $5 FROM rec
         RETURNING id
       )
       SELECT (SELECT count(*) FROM msg)::int AS fired,
              (SELECT pg_notify($10, $11) WHERE $11::text IS NOT NULL AND EXISTS (SELECT 1 FROM msg)) AS n`,
      [
        req.name,
        req.slot,
        req.version,
        req.missedRuns,
        req.now,
        m.id,
        m.signal,
        m.key,
        jsonParam(m.payload),
        ctx.channel,
        notify,
      ],
    );
    const fired = (rows[0]?.fired ?? 0) > 0;
    if (fired) ctx.emit(enqueuedEvents([m]));
    return fired;
  } catch (err) {
    throw mapConflict(err);
  }
}

/**
 * Many fires in one statement (each instance fires every due schedule each
 * tick, so 100 one-second clocks cost one statement per instance per second
 * instead of 100). Rows another instance is firing right now are skipped
 * (FOR UPDATE SKIP LOCKED): that instance decides the slot, and instances
 * firing together split the work instead of queueing on each row — and
 * never deadlock on rows locked in different orders. The NOTIFY names only
 * the signals whose fire applied. Measured with bench/clock-lag.ts.
 */
export async function fireBatch(ctx: PgContext, reqs: readonly FireRequest[]): Promise<boolean[]> {
  if (reqs.length === 0) return [];
  const now = reqs[0]!.now;
  const notify = ctx.notify;
  const sql = `WITH u AS (
       SELECT * FROM unnest($1::text[], $2::bigint[], $3::int[], $4::int[], $5::text[], $6::text[], $7::text[], $8::json[],
                            $13::text[], $14::bigint[])
         AS u(name, slot, version, missed, id, signal, key, payload, locked_by, lease_expires_at)
     ), locked AS (
       SELECT s.name FROM ${ctx.s}.schedules s JOIN u ON u.name = s.name
       WHERE s.version = u.version AND NOT s.paused AND NOT s.orphaned AND u.slot > s.anchor_at
         AND (s.last_slot IS NULL OR s.last_slot < u.slot)
       ORDER BY s.name
       FOR UPDATE OF s SKIP LOCKED
     ), upd AS (
       UPDATE ${ctx.s}.schedules s
       SET last_slot = u.slot, last_fired_at = $9, last_missed_runs = u.missed, updated_at = $9
       FROM u JOIN locked l ON l.name = u.name
       WHERE s.name = u.name
       RETURNING s.name
     ), rec AS (
       INSERT INTO ${ctx.s}.schedule_fires (clock, slot, fired_at, missed_runs, message_id)
       SELECT u.name, u.slot, $9, u.missed, u.id FROM u JOIN upd ON upd.name = u.name
       ON CONFLICT DO NOTHING
       RETURNING clock
     ), msg AS (
       INSERT INTO ${ctx.s}.messages
         (id, signal, key, payload, parent_run_id, created_at, updated_at, status, locked_by, lease_expires_at, attempts)
       SELECT u.id, u.signal, u.key, u.payload, NULL, $9, $9,
         CASE WHEN u.locked_by IS NULL THEN 'pending' ELSE 'inflight' END, u.locked_by, u.lease_expires_at,
         CASE WHEN u.locked_by IS NULL THEN 0 ELSE 1 END
       FROM u JOIN rec ON rec.clock = u.name
       RETURNING signal, locked_by
     ), woke AS (
       SELECT pg_notify($10, CASE WHEN length(p) > 7000 THEN json_build_object('o', $11::text, 'w', 1)::text ELSE p END)
       FROM (SELECT json_build_object('o', $11::text, 'e', json_agg(DISTINCT signal))::text AS p
             FROM msg WHERE locked_by IS NULL) x
       WHERE $12::boolean AND EXISTS (SELECT 1 FROM msg WHERE locked_by IS NULL)
     )
     SELECT rec.clock AS name FROM rec LEFT JOIN (SELECT count(*) FROM woke) w ON true`;
  // Prepared by name: every instance sends it each tick (losers too), and its parse took 0.3–0.9 ms a
  // call (private cluster, load 12), beside an execute of 0.3 ms when it lost. Its plan is still made
  // per call (bind 0.3–1.1 ms): PostgreSQL keeps choosing custom plans for it.
  const { rows } = await q<{ name: string }>(
    ctx.pool,
    sql,
    [
      reqs.map((r) => r.name),
      reqs.map((r) => r.slot),
      reqs.map((r) => r.version),
      reqs.map((r) => r.missedRuns),
      reqs.map((r) => r.message.id),
      reqs.map((r) => r.message.signal),
      reqs.map((r) => r.message.key),
      reqs.map((r) => jsonParam(r.message.payload)),
      now,
      ctx.channel,
      ctx.origin,
      notify,
      reqs.map((r) => r.claim?.worker ?? null),
      reqs.map((r) => r.claim?.leaseExpiresAt ?? null),
    ],
    preparedName("fire", sql),
  ).catch((err: unknown) => {
    throw mapConflict(err);
  });
  const fired = new Set(rows.map((r) => r.name));
  const out = reqs.map((r) => fired.has(r.name));
  // Fires written claimed are this instance's to run: nobody else is told.
  const applied = reqs.filter((r) => fired.has(r.name) && r.claim === undefined).map((r) => r.message);
  if (applied.length > 0) ctx.emit(enqueuedEvents(applied));
  return out;
}

/**
 * Notes a fire's failure or clears it. Instances learn that a clock has an error (or no longer has
 * one) from a wake sent when that changes, so whichever instance runs the next successful fire
 * clears it at once; a newer error over an older one changes nothing they act on and sends none.
 */
export async function recordScheduleError(
  ctx: PgContext,
  name: string,
  error: ScheduleError | null,
  now: number,
): Promise<void> {
  const { rows } = await q<{ had: boolean }>(
    ctx.pool,
    `WITH prev AS (
       SELECT name, last_error IS NOT NULL AS had FROM ${ctx.s}.schedules WHERE name = $1 FOR UPDATE
     )
     UPDATE ${ctx.s}.schedules s SET last_error = $2::jsonb, updated_at = $3
     FROM prev WHERE s.name = prev.name AND ($2::jsonb IS NOT NULL OR prev.had)
     RETURNING prev.had`,
    [name, error === null ? null : jsonParam(error), now],
  );
  const row = rows[0];
  if (row === undefined || row.had === (error !== null)) return;
  await announce(ctx, ctx.pool);
  ctx.emit([{ kind: "wake" }]);
}

export async function listFires(ctx: PgContext, name: string, limit = 100): Promise<ScheduleFire[]> {
  const { rows } = await q<{
    clock: string;
    slot: number;
    fired_at: number;
    missed_runs: number;
    message_id: string;
  }>(ctx.pool, `SELECT * FROM ${ctx.s}.schedule_fires WHERE clock = $1 ORDER BY slot DESC LIMIT $2`, [
    name,
    limit,
  ]);
  return rows.map((r) => ({
    name: r.clock,
    slot: r.slot,
    firedAt: r.fired_at,
    missedRuns: r.missed_runs,
    messageId: r.message_id,
  }));
}

export async function pruneFires(ctx: PgContext, before: number): Promise<number> {
  const { rowCount } = await q(
    ctx.pool,
    `DELETE FROM ${ctx.s}.schedule_fires f USING ${ctx.s}.schedules s
     WHERE f.clock = s.name AND f.fired_at < $1 AND f.slot IS DISTINCT FROM s.last_slot`,
    [before],
  );
  return rowCount;
}

/** The server's clock: fleet time for schedules (clock/fleet-time.ts). */
export async function storeTime(ctx: PgContext): Promise<number> {
  const { rows } = await q<{ t: number }>(ctx.pool, `SELECT ${DB_NOW_MS} AS t`, []);
  return rows[0]!.t;
}
