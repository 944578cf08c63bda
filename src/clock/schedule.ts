/** Clock declarations: `every("1h")` (anonymous interval) and `clock(name, options)` (named schedule). */
import type { Duration } from "./duration.ts";
import { specProblem, type ScheduleSpec } from "./schedule-spec.ts";

/** What a clock flow receives: which slot it serves. Times are epoch ms. */
export interface ClockInput {
  /** The clock's name (an `every(...)` is named after its flow). */
  clock: string;
  /** The slot this fire serves. */
  scheduledAt: number;
  /** When the fire was recorded (≥ scheduledAt; the difference is the fire lag). */
  firedAt: number;
  /** Slots skipped since the previous fire (downtime catch-up fires once, for the latest). */
  missedRuns: number;
}

/** What a clock says when it fires: exactly one of `cron` / `every` (the type requires it, as the run time does). */
export type ClockOptions = ClockOptionsBase &
  (
    | {
        /** Five fields `m h dom mon dow` (steps, ranges, lists, names) or `@hourly`, `@daily`, … */
        cron: string;
        every?: undefined;
        /** IANA time zone the cron is read in. Default `"UTC"`. */
        timezone?: string;
      }
    | {
        /** An interval in the duration grammar: `"30s"`, `"1h"`. Its slots are multiples of it since the epoch, in UTC. */
        every: Duration;
        cron?: undefined;
        /** cron only: an interval's slots are the same in every zone. */
        timezone?: undefined;
      }
  );

/** The options every clock takes, whichever way it says when to fire. */
export interface ClockOptionsBase {
  /** Operators may edit cron/every/timezone (any clock can be paused). Default `false`. */
  overridable?: boolean;
  /**
   * Whether the next slot may start while an earlier slot's flow still runs.
   * `true` (default): every slot is its own message and they run side by side.
   * `false`: fires of this clock queue behind each other (one at a time).
   */
  overlap?: boolean;
  /** Console / docs blurb. */
  description?: string;
  /** Extra attempts of a failed fire, as for a once signal. Default `3`. */
  retries?: number;
  /** Keep a fire whose attempts ran out as a dead letter. Default `true`. */
  deadLetter?: boolean;
}

/** A declared schedule: bind it with `on(handle, flow(...))`. `P` is its flow's input (phantom). */
export interface ClockSchedule<P = ClockInput> {
  readonly kind: "clock";
  /** The name, or undefined for `every(...)` (named after its flow at boot). */
  readonly name: string | undefined;
  readonly spec: ScheduleSpec;
  readonly overridable: boolean;
  readonly overlap: boolean;
  readonly description: string | undefined;
  readonly retries: number;
  readonly deadLetter: boolean;
  /** Phantom: the flow's input type, for inference only. */
  readonly __payload?: P;
}

const KNOWN = new Set([
  "cron",
  "every",
  "timezone",
  "overridable",
  "overlap",
  "description",
  "retries",
  "deadLetter",
]);

/** Declares a named schedule: `clock("reports.daily", { cron: "0 7 * * *", timezone: "Europe/Paris" })`. */
export function clock(name: string, options: ClockOptions): ClockSchedule {
  if (typeof name !== "string" || name.trim() === "")
    throw new TypeError("clock(name, options): name must be a non-empty string");
  return declare(`clock("${name}")`, name, options);
}

/** An anonymous interval trigger: `on(every("1h"), flow("links.purgeOld", { do }))`. */
export function every(interval: Duration): ClockSchedule {
  return declare(`every(${JSON.stringify(interval)})`, undefined, { every: interval });
}

function declare(where: string, name: string | undefined, options: ClockOptions): ClockSchedule {
  if (typeof options !== "object" || options === null)
    throw new TypeError(`${where}: options with cron or every are required`);
  for (const k of Object.keys(options))
    if (!KNOWN.has(k)) throw new TypeError(`${where}: unknown option "${k}"`);
  const { cron, every: interval, timezone = "UTC", overridable = false, overlap = true } = options;
  if ((cron === undefined) === (interval === undefined))
    throw new TypeError(`${where}: needs exactly one of cron or every`);
  if (cron !== undefined && typeof cron !== "string") throw new TypeError(`${where}: cron must be a string`);
  if (interval !== undefined && typeof interval !== "string")
    throw new TypeError(`${where}: every must be a duration string such as "1h"`);
  if (typeof timezone !== "string") throw new TypeError(`${where}: timezone must be an IANA zone name`);
  // An interval's slots are multiples of it since the epoch: a zone changes none of them, and one
  // given would read as if it did ("every 1d at midnight Paris" fires at UTC midnight).
  if (interval !== undefined && options.timezone !== undefined)
    throw new TypeError(
      `${where}: timezone applies to cron only; every("${String(interval)}") slots are multiples of the interval since the epoch, in UTC`,
    );
  const spec: ScheduleSpec = { cron: cron?.trim() ?? null, every: interval ?? null, timezone };
  const problem = specProblem(spec);
  if (problem !== undefined) throw new TypeError(`${where}: ${problem}`);
  for (const [k, v] of [
    ["overridable", overridable],
    ["overlap", overlap],
    ["deadLetter", options.deadLetter ?? true],
  ] as const)
    if (typeof v !== "boolean") throw new TypeError(`${where}: ${k} must be a boolean`);
  const retries = options.retries ?? 3;
  if (!Number.isInteger(retries) || retries < 0)
    throw new TypeError(`${where}: retries must be a non-negative integer, got ${String(retries)}`);
  if (options.description !== undefined && typeof options.description !== "string")
    throw new TypeError(`${where}: description must be a string`);
  return Object.freeze({
    kind: "clock",
    name,
    spec: Object.freeze(spec),
    overridable,
    overlap,
    description: options.description,
    retries,
    deadLetter: options.deadLetter ?? true,
  });
}

export const isClock = (v: unknown): v is ClockSchedule =>
  typeof v === "object" && v !== null && (v as { kind?: unknown }).kind === "clock";

/** The internal once signal a clock's fires travel on. */
export const clockSignalName = (clockName: string): string => `clock:${clockName}`;
