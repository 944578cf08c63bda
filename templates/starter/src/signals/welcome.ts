import { signal } from "okengine";
import { z } from "zod";

/** A work queue: each welcome mail is handled by exactly one worker, retried up to 3 times. */
export const welcomeTask = signal.once("welcome.send", {
  schema: z.object({ email: z.string().email() }),
  retries: 3,
});
