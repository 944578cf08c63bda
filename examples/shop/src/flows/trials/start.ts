import { flow, http, on } from "okengine";
import { z } from "zod";
import { rawEmail } from "@/channels/email";

/**
 * POST /trials/start — parks for three days, so the client gets 204 at once.
 * Any instance resumes the run when it is due; `mark-trial` never runs twice.
 */
export const start = on(
  http.post(),
  flow({
    durable: true,
    in: z.object({ email: z.string().email() }),
    do: async ({ email }, fx) => {
      await fx.step("mark-trial", () => ({ email, startedAt: fx.clock.now() }));
      await fx.clock.sleep("expiry-window", "3d");
      await fx.step("notify", () => fx.send(rawEmail, { to: email, body: "Your trial ends today." }));
    },
  }),
);
