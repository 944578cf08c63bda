import { clock, flow, on, signalReadRef } from "okengine";
import { emailTask } from "@/signals/email";

/**
 * Every morning at 07:00 Paris time: log how much mail is stuck in the dead-letter list. Operators
 * may move it (`overridable`), e.g. to 06:30 during an incident, and pause it like any clock.
 */
export const dlqReport = on(
  clock("ops.dlqReport", {
    cron: "0 7 * * *",
    timezone: "Europe/Paris",
    overridable: true,
    description: "Morning count of dead-lettered mail",
  }),
  flow("ops.dlqReport", {
    effects: { reads: [signalReadRef(emailTask)] },
    do: async ({ scheduledAt, missedRuns }, fx) => {
      const dead = await fx.deadLetters(emailTask);
      fx.log.info({ dead: dead.length, scheduledAt, missedRuns }, "dead-letter report");
      return { dead: dead.length };
    },
  }),
);
