import { flow, http, on } from "okengine";
import { emailTask } from "@/signals/email";

/** GET /ops/email-dlq — mail that exhausted its retries. */
export const list = on(
  http.get(),
  flow({
    effects: { reads: ["signal:tasks.email"] },
    do: async (_, fx) => await fx.deadLetters(emailTask),
  }),
);
