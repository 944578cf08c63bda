/** The schedule half of the memory engine: records and fired slots, synchronous and replayable. */
import type {
  DeclaredSchedule,
  ReconcileOptions,
  FireRequest,
  ScheduleError,
  ScheduleFire,
  ScheduleRecord,
  ScheduleSpec,
} from "../schedule-types.ts";
import {
  applyFire,
  applyOverride,
  applyPaused,
  cloneSchedule,
  fireApplies,
  planReconcile,
} from "../schedule-rules.ts";

/** Snapshot form: records plus each schedule's fires in slot order. */
export interface SchedulesSnapshot {
  records: ScheduleRecord[];
  fires: ScheduleFire[];
}

export class MemorySchedules {
  private readonly records = new Map<string, ScheduleRecord>();
  /** name → slot → fire. */
  private readonly fires = new Map<string, Map<number, ScheduleFire>>();

  load(snapshot: SchedulesSnapshot | undefined): void {
    for (const r of snapshot?.records ?? []) this.records.set(r.name, cloneSchedule(r));
    for (const f of snapshot?.fires ?? []) this.firesOf(f.name).set(f.slot, { ...f });
  }

  snapshot(): SchedulesSnapshot {
    return {
      records: [...this.records.values()].map(cloneSchedule),
      fires: [...this.fires.values()].flatMap((m) => [...m.values()].map((f) => ({ ...f }))),
    };
  }

  private firesOf(name: string): Map<number, ScheduleFire> {
    let m = this.fires.get(name);
    if (m === undefined) this.fires.set(name, (m = new Map<number, ScheduleFire>()));
    return m;
  }

  reconcile(
    declared: readonly DeclaredSchedule[],
    now: number,
    options?: ReconcileOptions,
  ): ScheduleRecord[] {
    for (const r of planReconcile([...this.records.values()], declared, now, options))
      this.records.set(r.name, r);
    return this.list();
  }

  list(): ScheduleRecord[] {
    return [...this.records.values()].map(cloneSchedule).sort((a, b) => a.name.localeCompare(b.name));
  }

  get(name: string): ScheduleRecord | undefined {
    const r = this.records.get(name);
    return r === undefined ? undefined : cloneSchedule(r);
  }

  setPaused(name: string, paused: boolean, now: number): ScheduleRecord | undefined {
    const r = this.records.get(name);
    if (r === undefined) return undefined;
    const next = applyPaused(r, paused, now);
    this.records.set(name, next);
    return cloneSchedule(next);
  }

  override(name: string, spec: ScheduleSpec | null, now: number): ScheduleRecord | undefined {
    const r = this.records.get(name);
    if (r === undefined) return undefined;
    const next = applyOverride(r, spec, now);
    this.records.set(name, next);
    return cloneSchedule(next);
  }

  /** Whether the fire would apply; changes nothing. */
  canFire(req: FireRequest): boolean {
    return fireApplies(this.records.get(req.name), req) && !this.fires.get(req.name)?.has(req.slot);
  }

  /** Records a fire `canFire` accepted. */
  recordFire(req: FireRequest): void {
    this.records.set(req.name, applyFire(this.records.get(req.name)!, req));
    this.firesOf(req.name).set(req.slot, {
      name: req.name,
      slot: req.slot,
      firedAt: req.now,
      missedRuns: req.missedRuns,
      messageId: req.message.id,
    });
  }

  recordError(name: string, error: ScheduleError | null, now: number): boolean {
    const r = this.records.get(name);
    if (r === undefined) return false;
    if (error === null && r.lastError === null) return false;
    this.records.set(name, {
      ...cloneSchedule(r),
      lastError: error === null ? null : { ...error },
      updatedAt: now,
    });
    return true;
  }

  listFires(name: string, limit = 100): ScheduleFire[] {
    return [...(this.fires.get(name)?.values() ?? [])]
      .sort((a, b) => b.slot - a.slot)
      .slice(0, limit)
      .map((f) => ({ ...f }));
  }

  prune(before: number): number {
    let n = 0;
    for (const [name, m] of this.fires) {
      const latest = this.records.get(name)?.lastSlot ?? null;
      for (const [slot, f] of m) {
        if (f.firedAt < before && slot !== latest) {
          m.delete(slot);
          n++;
        }
      }
    }
    return n;
  }
}
