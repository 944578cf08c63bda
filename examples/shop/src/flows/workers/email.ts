import { flow, on } from "okengine";
import { rawEmail } from "@/channels/email";
import { emailTask } from "@/signals/email";

/** Delivers queued mail. Addresses at bounce.test always fail: 3 attempts, then the dead-letter queue. */
export const processEmail = on(
  emailTask,
  flow("workers.email", {
    do: async ({ to, body }, fx) => {
      if (to.endsWith("@bounce.test")) throw new Error(`mailbox ${to} does not exist`);
      await fx.send(rawEmail, { to, body });
    },
  }),
);
