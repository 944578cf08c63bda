import { channel } from "okengine";
import { z } from "zod";

/**
 * Outgoing mail. In dev it is printed, in tests captured (app.sent), in prod POSTed as JSON to
 * EMAIL_WEBHOOK_URL (your mail service, or a small relay in front of it). Without that variable
 * prod warns at boot and every mail fails, ending as a dead letter.
 */
export const email = channel("email", {
  schema: z.object({ to: z.string(), subject: z.string() }),
  url: process.env.EMAIL_WEBHOOK_URL,
});
