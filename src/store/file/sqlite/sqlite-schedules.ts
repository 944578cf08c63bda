/** The file engine's schedules: records, reconcile, pause and override, fires and their pruning. */
import type {
  DeclaredSchedule,
  ReconcileOptions,
  FireRequest,
  ScheduleError,
  ScheduleFire,
  ScheduleRecord,
  ScheduleSpec,
} from "../../schedule-types.ts";
import {
  applyFire,
  applyOverride,
  applyPaused,
  cloneSchedule,
  fireApplies,
  planReconcile,
} from "../../schedule-rules.ts";
import type { SqliteBatch } from "./sqlite-batch.ts";
import type { SqliteQueue } from "./sqlite-queue.ts";

export class SqliteSchedules {
  constructor(
    private readonly b: SqliteBatch,
    private readonly queue: SqliteQueue,
  ) {}

  private schedule(name: string): ScheduleRecord | undefined {
    const r = this.b.get<{ doc: string }>("SELECT doc FROM schedules WHERE name = ?", name);
    return r === undefined ? undefined : (JSON.parse(r.doc) as ScheduleRecord);
  }

  private putSchedule(r: ScheduleRecord): void {
    this.b.run(
      `INSERT INTO schedules (name, last_slot, doc) VALUES (?, ?, ?)
       ON CONFLICT (name) DO UPDATE SET last_slot = excluded.last_slot, doc = excluded.doc`,
      r.name,
      r.lastSlot,
      JSON.stringify(r),
    );
  }

  reconcileSchedules(
    declared: readonly DeclaredSchedule[],
    now: number,
    options?: ReconcileOptions,
  ): ScheduleRecord[] {
    this.b.check();
    const current = this.listSchedules();
    this.b.write(() => {
      for (const r of planReconcile(current, declared, now, options)) this.putSchedule(r);
    });
    return this.listSchedules();
  }

  listSchedules(): ScheduleRecord[] {
    this.b.check();
    return this.b
      .all<{ doc: string }>("SELECT doc FROM schedules")
      .map((r) => JSON.parse(r.doc) as ScheduleRecord)
      .sort((a, b) => a.name.localeCompare(b.name));
  }

  getSchedule(name: string): ScheduleRecord | undefined {
    this.b.check();
    return this.schedule(name);
  }

  setSchedulePaused(name: string, paused: boolean, now: number): ScheduleRecord | undefined {
    this.b.check();
    const r = this.schedule(name);
    if (r === undefined) return undefined;
    const next = applyPaused(r, paused, now);
    this.b.write(() => this.putSchedule(next));
    return cloneSchedule(next);
  }

  overrideSchedule(name: string, spec: ScheduleSpec | null, now: number): ScheduleRecord | undefined {
    this.b.check();
    const r = this.schedule(name);
    if (r === undefined) return undefined;
    const next = applyOverride(r, spec, now);
    this.b.write(() => this.putSchedule(next));
    return cloneSchedule(next);
  }

  /** The fired slot and its message commit together: both are checked before either is written. */
  fire(req: FireRequest): boolean {
    this.b.check();
    const r = this.schedule(req.name);
    if (!fireApplies(r, req)) return false;
    if (
      this.b.get("SELECT 1 FROM schedule_fires WHERE name = ? AND slot = ?", req.name, req.slot) !== undefined
    )
      return false;
    this.queue.checkEnqueue([req.message]);
    this.b.write(() => {
      this.putSchedule(applyFire(r, req));
      this.b.run(
        "INSERT INTO schedule_fires (name, slot, fired_at, missed_runs, message_id) VALUES (?, ?, ?, ?, ?)",
        req.name,
        req.slot,
        req.now,
        req.missedRuns,
        req.message.id,
      );
      this.queue.insertMessages([req.message], req.now);
    });
    return true;
  }

  recordScheduleError(name: string, error: ScheduleError | null, now: number): boolean {
    this.b.check();
    const r = this.schedule(name);
    if (r === undefined) return false;
    if (error === null && r.lastError === null) return false;
    this.b.write(() =>
      this.putSchedule({
        ...cloneSchedule(r),
        lastError: error === null ? null : { ...error },
        updatedAt: now,
      }),
    );
    return true;
  }

  listFires(name: string, limit = 100): ScheduleFire[] {
    this.b.check();
    return this.b
      .all<{
        name: string;
        slot: number;
        fired_at: number;
        missed_runs: number;
        message_id: string;
      }>("SELECT * FROM schedule_fires WHERE name = ? ORDER BY slot DESC LIMIT ?", name, Math.max(0, limit))
      .map((f) => ({
        name: f.name,
        slot: f.slot,
        firedAt: f.fired_at,
        missedRuns: f.missed_runs,
        messageId: f.message_id,
      }));
  }

  pruneFires(before: number): number {
    this.b.check();
    // A schedule's latest fire stays: it is what a restarted scheduler resumes from.
    const sql = `FROM schedule_fires WHERE fired_at < ?
      AND slot IS NOT (SELECT last_slot FROM schedules s WHERE s.name = schedule_fires.name)`;
    if (this.b.get(`SELECT 1 ${sql} LIMIT 1`, before) === undefined) return 0;
    return this.b.write(() => this.b.run(`DELETE ${sql}`, before));
  }
}
