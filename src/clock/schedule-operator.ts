/** Implements the schedule operator API over the store and this app's schedule runtime. */
import { ClockResourceNotFoundError, OkeError } from "../errors.ts";
import { newId } from "../id.ts";
import type { ScheduleRecord, ScheduleSpec } from "../store/schedule-types.ts";
import { effectiveSpec } from "../store/schedule-types.ts";
import type { Store } from "../store/types.ts";
import { dstNotes } from "./dst.ts";
import type { ScheduleEdit, ScheduleOperatorApi, ScheduleView } from "./operator-types.ts";
import {
  clockMessage,
  declaredElsewhere,
  declaredElsewhereNote,
  nextFireAt,
  type ScheduleRuntime,
} from "./schedule-runtime.ts";
import { clockSignalName } from "./schedule.ts";
import { specProblem } from "./schedule-spec.ts";

const badEdit = (name: string, problem: string) =>
  new OkeError({
    code: "OKE1701",
    message: `clock "${name}": ${problem}`,
    fix: 'Pass { cron: "0 7 * * *" } or { every: "1h" } (not both), and/or { timezone: "Europe/Paris" }.',
    status: 400,
  });

const copySpec = (s: ScheduleSpec): ScheduleSpec => ({ cron: s.cron, every: s.every, timezone: s.timezone });

export function createScheduleOperator(store: Store, runtime: ScheduleRuntime): ScheduleOperatorApi {
  const view = (r: ScheduleRecord): ScheduleView => {
    const spec = effectiveSpec(r);
    const now = runtime.now();
    // The serving instance's own code, not the store's: another version's boot may have stored its own.
    const code = runtime.get(r.name)?.schedule.spec;
    const elsewhere = code === undefined ? undefined : declaredElsewhere(r, code);
    return {
      name: r.name,
      flow: r.flow,
      description: r.description,
      cron: spec.cron,
      every: spec.every,
      timezone: spec.timezone,
      declared: copySpec(code ?? r.declared),
      declaredElsewhere: elsewhere === undefined ? null : copySpec(elsewhere),
      declaredElsewhereNote:
        code === undefined || elsewhere === undefined ? null : declaredElsewhereNote(r, code),
      overridden: r.override !== null,
      overridable: r.overridable,
      paused: r.paused,
      orphaned: r.orphaned,
      nextFireAt: nextFireAt(r, now),
      lastScheduledAt: r.lastSlot,
      lastFiredAt: r.lastFiredAt,
      lagMs: r.lastSlot === null || r.lastFiredAt === null ? null : r.lastFiredAt - r.lastSlot,
      missedRuns: r.lastMissedRuns,
      lastError: r.lastError,
      dstNotes: dstNotes(spec, now),
    };
  };
  const found = (name: string, r: ScheduleRecord | undefined): ScheduleRecord => {
    if (r === undefined) throw new ClockResourceNotFoundError(name, "cron");
    return r;
  };
  const get = async (name: string): Promise<ScheduleRecord> => found(name, await store.getSchedule(name));

  return {
    list: async () => (await store.listSchedules()).map(view),
    get: async (name) => view(await get(name)),
    pause: async (name) => view(found(name, await store.setSchedulePaused(name, true, runtime.now()))),
    resume: async (name) => view(found(name, await store.setSchedulePaused(name, false, runtime.now()))),
    async edit(name, edit: ScheduleEdit) {
      const r = await get(name);
      if (typeof edit !== "object" || edit === null)
        throw badEdit(name, "edit needs cron, every or timezone");
      for (const k of Object.keys(edit))
        if (k !== "cron" && k !== "every" && k !== "timezone") throw badEdit(name, `unknown field "${k}"`);
      if (edit.cron !== undefined && edit.every !== undefined)
        throw badEdit(name, "needs exactly one of cron or every");
      if (edit.cron === undefined && edit.every === undefined && edit.timezone === undefined)
        throw badEdit(name, "edit needs cron, every or timezone");
      const cur = effectiveSpec(r);
      const spec: ScheduleSpec = {
        cron: edit.cron !== undefined ? String(edit.cron).trim() : edit.every !== undefined ? null : cur.cron,
        every: edit.every !== undefined ? String(edit.every) : edit.cron !== undefined ? null : cur.every,
        timezone: edit.timezone ?? cur.timezone,
      };
      // Not overridable is refused before the spec is judged: the clock cannot be edited at all.
      if (!r.overridable) return view(found(name, await store.overrideSchedule(name, spec, runtime.now())));
      const problem = specProblem(spec);
      if (problem !== undefined) throw badEdit(name, problem);
      return view(found(name, await store.overrideSchedule(name, spec, runtime.now())));
    },
    reset: async (name) => view(found(name, await store.overrideSchedule(name, null, runtime.now()))),
    async trigger(name) {
      const r = await get(name);
      const bound = runtime.get(name);
      if (bound === undefined || r.orphaned)
        throw new OkeError({
          code: "OKE1702",
          message: `clock "${name}" is not bound to a flow in this app (orphaned), so it cannot fire`,
          fix: "Declare it again with on(clock, flow(...)), or trigger it from an app that does.",
          status: 409,
        });
      const now = runtime.now();
      const messageId = `${clockSignalName(name)}:manual:${newId(now)}`;
      await store.enqueue(
        [clockMessage(bound, messageId, { clock: name, scheduledAt: now, firedAt: now, missedRuns: 0 })],
        now,
      );
      return { clock: name, messageId, scheduledAt: now };
    },
  };
}
