import { signal } from "okengine";
import { z } from "zod";

export const orderPlaced = signal.once("orders.placed", {
  schema: z.object({ orderId: z.string(), amount: z.number().positive(), userId: z.string() }),
});

export const trialStarted = signal.once("trials.started", {
  schema: z.object({ trialId: z.string(), email: z.string().email() }),
});
