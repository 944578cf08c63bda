import { flow, on } from "okengine";
import { email } from "@/channels/email";
import { welcomeTask } from "@/signals/welcome";

/** The worker of the welcome.send queue. A throw here is retried; after the last retry it is a dead letter. */
export const sendWelcome = on(
  welcomeTask,
  flow("workers.welcome", {
    do: async ({ email: to }, fx) => {
      await fx.send(email, { to, subject: "Welcome!" });
    },
  }),
);
