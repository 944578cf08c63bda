import { signal } from "okengine";
import { z } from "zod";

export const orderPlaced = signal.once("orders.placed", {
  schema: z.object({ orderId: z.string(), amount: z.number().positive(), userId: z.string() }),
});

/** Each order's status feed: one tape per order id, kept a day, watched by browsers over SSE. */
export const orderStatus = signal.live("orders.status", {
  schema: z.object({ state: z.enum(["placed", "charged", "shipped"]), at: z.number() }),
  retention: "24h",
});
