import { channel } from "okengine";
import { z } from "zod";

// In dev the console driver prints each mail; tests capture them with the memory driver; in prod
// each is POSTed as JSON to EMAIL_WEBHOOK_URL (without it, prod warns at boot; see docs/channels.md).
export const rawEmail = channel("email.raw", {
  schema: z.object({ to: z.string().email(), body: z.string() }),
  url: process.env.EMAIL_WEBHOOK_URL,
});
