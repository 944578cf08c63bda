import { flow, http, on } from "okengine";
import { z } from "zod";
import { emailTask } from "@/signals/email";

/** POST /ops/send-email — queue a mail (try an address at bounce.test to watch it dead-letter). */
export const sendEmail = on(
  http.post(),
  flow({
    in: z.object({ to: z.string().email(), body: z.string() }),
    do: async (mail, fx) => {
      await fx.emit(emailTask, mail);
    },
  }),
);
