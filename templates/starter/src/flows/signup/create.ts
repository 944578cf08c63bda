import { flow, http, on } from "okengine";
import { z } from "zod";
import { welcomeTask } from "@/signals/welcome";

/** POST /signup — answers at once and leaves the mail to a worker (src/flows/workers/welcome.ts). */
export const create = on(
  http.post(),
  flow({
    in: z.object({ email: z.string().email() }),
    do: async ({ email }, fx) => {
      await fx.emit(welcomeTask, { email });
      return { signedUp: email };
    },
  }),
);
