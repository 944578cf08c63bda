/** The schedule rules every driver applies the same way: reconcile, pause, override, fire eligibility. */
import { ScheduleNotOverridableError } from "../errors.ts";
import type {
  DeclaredSchedule,
  FireRequest,
  ReconcileOptions,
  ScheduleRecord,
  ScheduleSpec,
} from "./schedule-types.ts";

/** The same slots: an interval's zone (left stored by an edit from a cron) changes none, so it is not compared. */
const sameSpec = (a: ScheduleSpec | null, b: ScheduleSpec | null): boolean =>
  a === b ||
  (a !== null &&
    b !== null &&
    a.cron === b.cron &&
    a.every === b.every &&
    (a.every !== null || a.timezone === b.timezone));

const copySpec = (s: ScheduleSpec): ScheduleSpec => ({ cron: s.cron, every: s.every, timezone: s.timezone });

export const cloneSchedule = (r: ScheduleRecord): ScheduleRecord => ({
  ...r,
  declared: copySpec(r.declared),
  override: r.override === null ? null : copySpec(r.override),
  lastError: r.lastError === null ? null : { ...r.lastError },
});

/**
 * The records that change when `declared` meets `existing` at `now` (new,
 * changed, orphaned, un-orphaned). Which wins: an operator override of an
 * overridable clock outlives code changes; making a clock non-overridable
 * drops the override.
 */
export function planReconcile(
  existing: readonly ScheduleRecord[],
  declared: readonly DeclaredSchedule[],
  now: number,
  options: ReconcileOptions = {},
): ScheduleRecord[] {
  const byName = new Map(existing.map((r) => [r.name, r]));
  const wanted = new Set(declared.map((d) => d.name));
  const changed: ScheduleRecord[] = [];
  for (const d of declared) {
    const prev = byName.get(d.name);
    if (prev === undefined) {
      changed.push({
        name: d.name,
        declared: copySpec(d.spec),
        override: null,
        overridable: d.overridable,
        flow: d.flow,
        description: d.description,
        paused: false,
        orphaned: false,
        version: 1,
        anchorAt: now,
        lastSlot: null,
        lastFiredAt: null,
        lastMissedRuns: 0,
        lastError: null,
        createdAt: now,
        updatedAt: now,
      });
      continue;
    }
    const override = d.overridable ? prev.override : null;
    const before = prev.override ?? prev.declared;
    const after = override ?? d.spec;
    const effectiveChanged = !sameSpec(before, after);
    if (
      !effectiveChanged &&
      sameSpec(prev.declared, d.spec) &&
      sameSpec(prev.override, override) &&
      prev.overridable === d.overridable &&
      prev.flow === d.flow &&
      prev.description === d.description &&
      !prev.orphaned
    )
      continue;
    changed.push({
      ...cloneSchedule(prev),
      declared: copySpec(d.spec),
      override: override === null ? null : copySpec(override),
      overridable: d.overridable,
      flow: d.flow,
      description: d.description,
      orphaned: false,
      version: effectiveChanged ? prev.version + 1 : prev.version,
      anchorAt: effectiveChanged ? now : prev.anchorAt,
      updatedAt: now,
    });
  }
  if (options.orphanMissing === false) return changed;
  for (const r of existing) {
    if (!wanted.has(r.name) && !r.orphaned)
      changed.push({ ...cloneSchedule(r), orphaned: true, version: r.version + 1, updatedAt: now });
  }
  return changed;
}

/** The record after pause/resume, or `r` itself when nothing changes. */
export function applyPaused(r: ScheduleRecord, paused: boolean, now: number): ScheduleRecord {
  if (r.paused === paused) return r;
  return {
    ...cloneSchedule(r),
    paused,
    version: r.version + 1,
    // A resumed clock does not catch up the slots it was paused for.
    anchorAt: paused ? r.anchorAt : Math.max(r.anchorAt, now),
    updatedAt: now,
  };
}

/** The record after an operator edit (null clears it). Throws for a clock that is not overridable. */
export function applyOverride(r: ScheduleRecord, spec: ScheduleSpec | null, now: number): ScheduleRecord {
  if (!r.overridable) throw new ScheduleNotOverridableError(r.name);
  return {
    ...cloneSchedule(r),
    override: spec === null ? null : copySpec(spec),
    version: r.version + 1,
    anchorAt: now,
    updatedAt: now,
  };
}

/** Whether a fire applies to the record (the fired-slot key is checked by the driver). */
export const fireApplies = (r: ScheduleRecord | undefined, req: FireRequest): r is ScheduleRecord =>
  r !== undefined &&
  r.version === req.version &&
  !r.paused &&
  !r.orphaned &&
  req.slot > r.anchorAt &&
  (r.lastSlot === null || req.slot > r.lastSlot);

/** The record after a fire applied. */
export const applyFire = (r: ScheduleRecord, req: FireRequest): ScheduleRecord => ({
  ...cloneSchedule(r),
  lastSlot: req.slot,
  lastFiredAt: req.now,
  lastMissedRuns: req.missedRuns,
  updatedAt: req.now,
});
