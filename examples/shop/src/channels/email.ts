import { channel } from "okengine";
import { z } from "zod";

// In dev the console driver prints each mail; tests capture them with the memory driver.
export const rawEmail = channel("email.raw", {
  schema: z.object({ to: z.string().email(), body: z.string() }),
});
