/** Finds where a cron meets a DST gap or overlap of its zone in the coming year, for the boot warning. */
import { Cron } from "croner";
import type { ScheduleSpec } from "../store/schedule-types.ts";

const DAY = 86_400_000;

const formatters = new Map<string, Intl.DateTimeFormat>();

/** Each zone's last answer: a cron's next slot is asked from the previous one, so it is asked again. */
const lastOffset = new Map<string, { t: number; off: number }>();

/** The zone's UTC offset at instant `t`, in ms (east positive). */
export function zoneOffset(tz: string, t: number): number {
  const last = lastOffset.get(tz);
  if (last?.t === t) return last.off;
  const off = computeOffset(tz, t);
  lastOffset.set(tz, { t, off });
  return off;
}

function computeOffset(tz: string, t: number): number {
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

/**
 * The first whole second in (lo, hi] whose offset is not `prev`, given that `hi`'s is not. Offsets
 * change on whole seconds, so the answer is the transition itself whatever `lo` and `hi` are: a
 * search stepping from an unaligned `now` would land between transitions' seconds and carry the
 * leftover into every wall time derived from it.
 */
function changeAt(tz: string, lo: number, hi: number, prev: number): number {
  let a = Math.floor(lo / 1000);
  let b = Math.ceil(hi / 1000);
  while (b - a > 1) {
    const mid = Math.floor((a + b) / 2);
    if (zoneOffset(tz, mid * 1000) === prev) a = mid;
    else b = mid;
  }
  return b * 1000;
}

/** DST transitions of `tz` in [start, start + days), to the second. Zones change at most once a day. */
export function transitions(tz: string, start: number, days = 366): Transition[] {
  const out: Transition[] = [];
  let prev = zoneOffset(tz, start);
  for (let d = 1; d <= days; d++) {
    const t = start + d * DAY;
    const off = zoneOffset(tz, t);
    if (off === prev) continue;
    const at = changeAt(tz, t - DAY, t, prev);
    out.push(
      off > prev
        ? { at, kind: "gap", from: at + prev, to: at + off }
        : { at, kind: "overlap", from: at + off, to: at + prev },
    );
    prev = off;
  }
  return out;
}

/**
 * The DST gaps of `tz` whose instant is in (start, end], to the second. Offsets are compared a day
 * apart at most (zones change at most once in a day), so a span under a day costs two look-ups.
 */
export function gapsBetween(tz: string, start: number, end: number): Transition[] {
  const out: Transition[] = [];
  let prev = zoneOffset(tz, start);
  for (let lo = start; lo < end;) {
    const hi = Math.min(end, lo + DAY);
    const off = zoneOffset(tz, hi);
    if (off !== prev) {
      const at = changeAt(tz, lo, hi, prev);
      if (off > prev && at > start) out.push({ at, kind: "gap", from: at + prev, to: at + off });
      prev = off;
    }
    lo = hi;
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
        ? `cron "${spec.cron}" in ${spec.timezone} meets a DST gap on ${iso(tr.from).slice(0, 10)} (local ${iso(tr.from).slice(11)}–${iso(tr.to).slice(11)} does not exist): ${gapFires(wallCron, tr)}`
        : `cron "${spec.cron}" in ${spec.timezone} meets a DST overlap on ${iso(tr.from).slice(0, 10)} (local ${iso(tr.from).slice(11)}–${iso(tr.to).slice(11)} happens twice): a daily fire runs once, at the first pass; finer crons fire in both passes`,
    );
  }
  return notes;
}

/** What happens to a cron's fires in a gap (schedule-spec.ts): each runs at its end, together once. */
function gapFires(wallCron: Cron, tr: Transition): string {
  const times: string[] = [];
  for (let w = wallCron.nextRun(new Date(tr.from - 1000)); w !== null && w.getTime() < tr.to;) {
    times.push(iso(w.getTime()).slice(11));
    w = wallCron.nextRun(w);
  }
  const end = `${iso(tr.to).slice(11)}, the next valid instant`;
  if (times.length === 1) return `the fire at ${times[0]} runs at ${end}`;
  const shown = times.length > 4 ? `${times.slice(0, 3).join(", ")} … ${times.at(-1)!}` : times.join(", ");
  return `the fires at ${shown} run once, at ${end}`;
}
