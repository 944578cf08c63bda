/** Finds where a cron meets a DST gap or overlap of its zone in the coming year, for the boot warning. */
import { Cron } from "croner";
import type { ScheduleSpec } from "../store/schedule-types.ts";

const MINUTE = 60_000;
const DAY = 86_400_000;

const formatters = new Map<string, Intl.DateTimeFormat>();

/** The zone's UTC offset at instant `t`, in ms (east positive). */
export function zoneOffset(tz: string, t: number): number {
  let f = formatters.get(tz);
  if (f === undefined) {
    f = new Intl.DateTimeFormat("en-US", {
      timeZone: tz,
      hourCycle: "h23",
      year: "numeric",
      month: "numeric",
      day: "numeric",
      hour: "numeric",
      minute: "numeric",
      second: "numeric",
    });
    formatters.set(tz, f);
  }
  const p: Record<string, number> = {};
  for (const part of f.formatToParts(new Date(t)))
    if (part.type !== "literal") p[part.type] = Number(part.value);
  const wall = Date.UTC(p.year!, p.month! - 1, p.day, p.hour, p.minute, p.second);
  return wall - Math.floor(t / 1000) * 1000;
}

export interface Transition {
  /** The instant the offset changes. */
  at: number;
  /** "gap": local times [from, to) do not exist; "overlap": they happen twice. Wall times as UTC ms. */
  kind: "gap" | "overlap";
  from: number;
  to: number;
}

/** DST transitions of `tz` in [start, start + days). */
export function transitions(tz: string, start: number, days = 366): Transition[] {
  const out: Transition[] = [];
  let prev = zoneOffset(tz, start);
  for (let d = 1; d <= days; d++) {
    const t = start + d * DAY;
    const off = zoneOffset(tz, t);
    if (off === prev) continue;
    // Bisect to the minute the offset changed.
    let lo = t - DAY;
    let hi = t;
    while (hi - lo > MINUTE) {
      const mid = lo + Math.floor((hi - lo) / 2 / MINUTE) * MINUTE || lo + MINUTE;
      if (zoneOffset(tz, mid) === prev) lo = mid;
      else hi = mid;
    }
    const at = hi;
    out.push(
      off > prev
        ? { at, kind: "gap", from: at + prev, to: at + off }
        : { at, kind: "overlap", from: at + off, to: at + prev },
    );
    prev = off;
  }
  return out;
}

const iso = (wall: number): string => new Date(wall).toISOString().slice(0, 16).replace("T", " ");

/**
 * Human notes for each transition in the next year that the cron would fire
 * in, or [] for intervals, UTC and DST-free zones. The local wall times of the
 * window are matched against the same cron read in UTC, so day-of-week and
 * day-of-month are those of the local date.
 */
export function dstNotes(spec: ScheduleSpec, now: number): string[] {
  if (spec.cron === null || spec.timezone === "UTC") return [];
  const notes: string[] = [];
  const wallCron = new Cron(spec.cron, { mode: "5-part", timezone: "UTC", paused: true });
  for (const tr of transitions(spec.timezone, now)) {
    const hit = wallCron.nextRun(new Date(tr.from - 1000))?.getTime();
    if (hit === undefined || hit >= tr.to) continue;
    notes.push(
      tr.kind === "gap"
        ? `cron "${spec.cron}" in ${spec.timezone} meets a DST gap on ${iso(tr.from).slice(0, 10)} (local ${iso(tr.from).slice(11)}–${iso(tr.to).slice(11)} does not exist): that fire runs at the next valid instant`
        : `cron "${spec.cron}" in ${spec.timezone} meets a DST overlap on ${iso(tr.from).slice(0, 10)} (local ${iso(tr.from).slice(11)}–${iso(tr.to).slice(11)} happens twice): a daily fire runs once, at the first pass; finer crons fire in both passes`,
    );
  }
  return notes;
}
