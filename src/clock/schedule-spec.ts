/** A schedule's spec (cron XOR every, in a timezone) turned into slot arithmetic: next slot, latest due slot. */
import { Cron } from "croner";
import type { ScheduleSpec } from "../store/schedule-types.ts";
import { gapsBetween, zoneOffset } from "./dst.ts";
import { parseDuration } from "./duration.ts";

export type { ScheduleSpec } from "../store/schedule-types.ts";

/** Slot maths of one spec. Slots are epoch ms; a slot "after t" is strictly greater than t. */
export interface CompiledSpec {
  readonly spec: ScheduleSpec;
  /** The first slot strictly after `t`, or null when the spec never fires again. */
  next(t: number): number | null;
  /**
   * The latest slot in `(after, now]` and how many slots that interval holds
   * (`count - 1` were missed). Null when none is due.
   */
  latestDue(after: number, now: number): { slot: number; count: number } | null;
}

/** Counting missed cron slots stops here; `missedRuns` then reads "at least this many". */
export const MAX_COUNTED_SLOTS = 100_000;

/** The nicknames a cron may be (croner reads them all): the check and its error read this one list. */
const NICKNAMES = ["@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"] as const;

/** The five fields, named as an error names them, with what each accepts. */
const FIELDS = [
  ["minute", "0-59"],
  ["hour", "0-23"],
  ["day-of-month", "1-31 or L"],
  ["month", "1-12 or jan-dec"],
  ["day-of-week", "0-7 or sun-sat"],
] as const;

/**
 * Where a spec's search for a next fire starts when judging whether it ever fires: a fixed instant,
 * so the verdict does not depend on the clock. A 5-field cron repeats with the calendar (it has no
 * year), so one that fires at all fires after any instant.
 */
const NEVER_FIRES_PROBE = Date.UTC(2000, 0, 1);

/**
 * Why a spec may not be declared or set by an operator's edit, or undefined when it may: a spec
 * that is malformed, or a cron that matches no date at all (`0 0 31 2 *`), which would be a clock
 * that silently never fires.
 */
export function specProblem(spec: ScheduleSpec): string | undefined {
  const problem = shapeProblem(spec);
  if (problem !== undefined || spec.cron === null) return problem;
  const cron = spec.cron.trim();
  const probe = new Cron(cron, { mode: "5-part", timezone: "UTC", paused: true });
  if (probe.nextRun(new Date(NEVER_FIRES_PROBE)) === null)
    return `cron "${cron}" never fires: no date matches it (check its day-of-month against its month)`;
  return undefined;
}

/**
 * Why a spec cannot be compiled, or undefined when it can. Looser than specProblem: a stored spec
 * that never fires (an operator edit made before specProblem refused it) still compiles, with no
 * next slot, rather than throwing at every look-up of the runtime.
 */
/** The last instant a Date holds (year 275760). */
const LAST_DATE_MS = 8_640_000_000_000_000;

function shapeProblem(spec: ScheduleSpec): string | undefined {
  if ((spec.cron === null) === (spec.every === null)) return "needs exactly one of cron or every";
  if (!isTimeZone(spec.timezone)) return `timezone "${spec.timezone}" is not an IANA time zone`;
  if (spec.every !== null) {
    const ms = parseDuration(spec.every);
    if (ms <= 0) return `every "${spec.every}" is not a positive duration (integer + ms|s|m|h|d, e.g. "1h")`;
    // Its first slot, a multiple of it since the epoch, would lie past the last date JavaScript holds.
    if (ms > LAST_DATE_MS) return `every "${spec.every}" never fires: its first slot is past the year 275760`;
    return undefined;
  }
  const cron = spec.cron!.trim();
  if (cron.startsWith("@")) {
    if ((NICKNAMES as readonly string[]).includes(cron.toLowerCase())) return undefined;
    const interval = /^@every\s+(\S+)$/i.exec(cron)?.[1];
    const hint = interval === undefined ? "" : `; an interval is every: "${interval}", not a cron`;
    return `cron "${cron}" is not a known nickname (${NICKNAMES.join(" ")})${hint}`;
  }
  const fields = cron.split(/\s+/);
  if (fields.length !== 5)
    return `cron "${cron}" must have five fields (m h dom mon dow), it has ${fields.length}`;
  try {
    new Cron(cron, { mode: "5-part", timezone: spec.timezone, paused: true });
  } catch (e) {
    return `cron "${cron}" does not parse: ${fieldProblem(fields) ?? errorText(e)}`;
  }
  return undefined;
}

const errorText = (e: unknown): string =>
  (e instanceof Error ? e.message : String(e)).replace(/^CronPattern: /, "");

/**
 * The first field of a cron that croner refuses on its own, named and quoted as the user wrote it.
 * croner's own message describes its rewrite of the field (`configuration entry 5 (1-fry)` for
 * `mon-fry`, `day: 31` for 32), so it is kept only when it says something else (a bad step or range).
 */
function fieldProblem(fields: readonly string[]): string | undefined {
  for (const [i, [name, accepts]] of FIELDS.entries()) {
    const alone = FIELDS.map((_, j) => (j === i ? fields[i] : "*")).join(" ");
    try {
      new Cron(alone, { mode: "5-part", timezone: "UTC", paused: true });
    } catch (e) {
      const detail = errorText(e);
      const rewritten = /configuration entry|Invalid value for/.test(detail);
      return `${name} field "${fields[i]}" is not valid (${accepts})${rewritten ? "" : `: ${detail}`}`;
    }
  }
  return undefined;
}

export function isTimeZone(tz: string): boolean {
  if (typeof tz !== "string" || tz === "") return false;
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: tz });
    return true;
  } catch {
    return false;
  }
}

/**
 * Compiles a spec that `specProblem` accepted, or a stored one that never fires (`next` is then
 * always null). Throws TypeError for a malformed spec.
 */
export function compileSpec(spec: ScheduleSpec): CompiledSpec {
  const problem = shapeProblem(spec);
  if (problem !== undefined) throw new TypeError(`schedule: ${problem}`);
  if (spec.every !== null) {
    const ms = parseDuration(spec.every);
    const next = (t: number): number => Math.floor(t / ms) * ms + ms;
    return {
      spec,
      next,
      latestDue(after, now) {
        const slot = Math.floor(now / ms) * ms;
        if (slot <= after) return null;
        return { slot, count: (slot - next(after)) / ms + 1 };
      },
    };
  }
  const cron = new Cron(spec.cron!.trim(), { mode: "5-part", timezone: spec.timezone, paused: true });
  const zoned = (t: number): number | null => cron.nextRun(new Date(t))?.getTime() ?? null;
  const next = spec.timezone === "UTC" ? zoned : gapAware(spec, zoned);
  return {
    spec,
    next,
    latestDue(after, now) {
      let slot: number | null = null;
      let count = 0;
      for (let t = next(after); t !== null && t <= now; t = next(t)) {
        slot = t;
        if (++count >= MAX_COUNTED_SLOTS) {
          // A long outage of a frequent cron: the latest slot is what matters, the count saturates.
          const latest = cron.previousRuns(1, new Date(now + 1))[0]?.getTime();
          if (latest !== undefined && latest > slot) slot = latest;
          break;
        }
      }
      return slot === null ? null : { slot, count };
    },
  };
}

/**
 * `next` of a cron in a zone with DST gaps. croner moves a fire whose local time does not exist to
 * the end of the gap only when the minute and hour fields hold one value each; `0,30 2 * * *` or
 * `30 2-3 * * *` lost their gap fires on a spring-forward day. Here the cron is read on local wall
 * time: every fire whose local time falls in a gap runs at the gap's end, the next valid instant,
 * and fires that land there together are one (a slot is an instant). Fires at real local times
 * are croner's, overlaps included.
 */
function gapAware(spec: ScheduleSpec, zoned: (t: number) => number | null): (t: number) => number | null {
  const wall = new Cron(spec.cron!.trim(), { mode: "5-part", timezone: "UTC", paused: true });
  const tz = spec.timezone;
  // Whether the cron fires at local wall time `w` (wall times as UTC ms).
  const firesAtWall = (w: number): boolean => wall.nextRun(new Date(w - 1))?.getTime() === w;
  return (t) => {
    for (let from = t; ;) {
      const real = zoned(from);
      // A gap before the next real fire whose local times hold a fire: it runs at the gap's end.
      // Looked for from `t`, not `from`: it may lie before a fire skipped in an earlier turn.
      const gaps = gapsBetween(tz, t, real ?? t + YEAR);
      for (const g of gaps) {
        const hit = wall.nextRun(new Date(g.from - 1))?.getTime();
        if (hit !== undefined && hit < g.to && g.at > t && (real === null || g.at <= real)) return g.at;
      }
      if (real === null) return null;
      // croner moves a gap fire (single-valued fields) only to a gap's end, so with no gap passed
      // `real` is a real local time of the cron; past a gap it may be such a move, found above or
      // not a fire of the cron at all.
      const gapPassed = (from === t ? gaps : gapsBetween(tz, from, real)).length > 0;
      if (!gapPassed || firesAtWall(real + zoneOffset(tz, real))) return real;
      from = real;
    }
  };
}

const YEAR = 366 * 86_400_000;

/** compiledSpec's memo, by spec. */
const compiledSpecs = new Map<string, CompiledSpec>();

/**
 * compileSpec, memoized by spec (it is pure): compiling a zoned cron takes ~1.5 ms (measured, 100
 * zoned crons), and the runtime and the Console's stranded-clock check ask again for the same specs
 * at every check or poll. Cleared past 1 000 specs, since edits make new ones.
 */
export function compiledSpec(spec: ScheduleSpec): CompiledSpec {
  const key = `${spec.cron ?? ""}\u0000${spec.every ?? ""}\u0000${spec.timezone}`;
  let c = compiledSpecs.get(key);
  if (c === undefined) {
    if (compiledSpecs.size >= 1_000) compiledSpecs.clear();
    compiledSpecs.set(key, (c = compileSpec(spec)));
  }
  return c;
}
