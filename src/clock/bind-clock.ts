/** Names a clock bound to a flow and checks that each clock name fires one flow with one spec. */
import { OkeError } from "../errors.ts";
import type { BoundClock } from "./schedule-runtime.ts";
import { clockSignalName, type ClockSchedule } from "./schedule.ts";

export type { BoundClock } from "./schedule-runtime.ts";

/**
 * Adds the binding of `schedule` to `flow` to `clocks` and returns it. An
 * `every(...)` takes its flow's name. One name, two flows (or two different
 * declarations) is a boot error.
 */
export function adoptClock(
  clocks: Map<string, BoundClock>,
  schedule: ClockSchedule<unknown>,
  flow: string,
): BoundClock {
  const name = schedule.name ?? flow;
  const prev = clocks.get(name);
  if (
    prev !== undefined &&
    (prev.flow !== flow || JSON.stringify(prev.schedule) !== JSON.stringify(schedule))
  )
    throw new OkeError({
      code: "OKE1703",
      message:
        prev.flow !== flow
          ? JSON.stringify(prev.schedule) === JSON.stringify(schedule)
            ? `Clock "${name}" is bound to more than one Flow (${prev.flow}, ${flow}).`
            : // Two declarations that share a name: an every() takes its flow's name, which may be a clock's.
              `Two clocks are named "${name}": one fires flow ${prev.flow}, the other flow ${flow}.`
          : `Clock "${name}" is declared twice with different options.`,
      fix: 'Give each clock a name of its own (clock("name", …); an every() is named after its flow), and bind each clock to one flow.',
    });
  const bound: BoundClock = { name, schedule, flow };
  clocks.set(name, bound);
  return bound;
}

/** Options of the once signal a clock's fires travel on: the clock's delivery options. */
export const clockSignalOptions = (b: BoundClock) => ({
  name: clockSignalName(b.name),
  retries: b.schedule.retries,
  deadLetter: b.schedule.deadLetter,
  description: b.schedule.description ?? `fires of clock "${b.name}"`,
});
