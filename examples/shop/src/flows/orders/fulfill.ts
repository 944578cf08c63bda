import { flow, on } from "okengine";
import { rawEmail } from "@/channels/email";
import { emailTask } from "@/signals/email";
import { orderPlaced, orderStatus } from "@/signals/orders";

/** A durable consumer: if the process dies between steps, a redelivery resumes after the last finished step. */
export const fulfill = on(
  orderPlaced,
  flow("orders.fulfill", {
    durable: true,
    do: async ({ orderId, amount, userId }, fx) => {
      const charge = await fx.step("charge", () => ({ chargeId: `ch_${orderId}`, amount }));
      await fx.emit(orderStatus, { state: "charged", at: fx.clock.now() }, { key: orderId });
      await fx.step("ship", () =>
        fx.send(rawEmail, { to: "warehouse@example.com", body: `ship ${orderId}` }),
      );
      await fx.emit(orderStatus, { state: "shipped", at: fx.clock.now() }, { key: orderId });
      await fx.emit(emailTask, {
        to: `${userId}@example.com`,
        body: `Order ${orderId} charged (${charge.chargeId})`,
      });
    },
  }),
);
