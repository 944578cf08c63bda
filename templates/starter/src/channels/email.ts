import { channel } from "okengine";
import { z } from "zod";

/** Outgoing mail. In dev it is printed, in tests captured (app.sent), in prod posted to a webhook. */
export const email = channel("email", {
  schema: z.object({ to: z.string(), subject: z.string() }),
});
