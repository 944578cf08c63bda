import { flow, http, on, signalReadRef } from "okengine";
import { emailTask } from "@/signals/email";

/**
 * GET /ops/email-dlq — mail that exhausted its retries. `oke` records this read from the source by
 * itself; it is written out here so the flow also works when its module is loaded without `oke`.
 */
export const list = on(
  http.get(),
  flow({
    effects: { reads: [signalReadRef(emailTask)] },
    do: async (_, fx) => await fx.deadLetters(emailTask),
  }),
);
