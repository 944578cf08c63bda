import { flow, http, on } from "okengine";
import { z } from "zod";
import { orderPlaced, orderStatus } from "@/signals/orders";

/** POST /orders (a `create` leaf adds no segment) — answers with the order id; fulfilment runs in the background, in order per user. */
export const create = on(
  http.post(),
  flow({
    in: z.object({ userId: z.string(), amount: z.number().positive() }),
    do: async ({ userId, amount }, fx) => {
      const orderId = fx.id();
      await fx.emit(orderPlaced, { orderId, amount, userId }, { key: userId });
      await fx.emit(orderStatus, { state: "placed", at: fx.clock.now() }, { key: orderId });
      return { orderId };
    },
  }),
);
