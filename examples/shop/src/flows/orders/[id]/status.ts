import { flow, http, on } from "okengine";
import { orderStatus } from "@/signals/orders";

/**
 * GET /orders/:id/status — the order's status as server-sent events: what happened so far, then each
 * change as it happens. In a browser: `new EventSource("/orders/<id>/status").onmessage = (e) => console.log(e.data)`.
 */
export const status = on(
  http.get(),
  flow({ do: ({ id }: { id: string }, fx) => fx.live(orderStatus, { key: id }) }),
);
