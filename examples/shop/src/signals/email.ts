import { signal } from "okengine";
import { z } from "zod";

export const emailTask = signal.once("tasks.email", {
  schema: z.object({ to: z.string().email(), body: z.string() }),
  retries: 2,
  deadLetter: true,
  description: "Outgoing e-mail, one worker per message",
});
