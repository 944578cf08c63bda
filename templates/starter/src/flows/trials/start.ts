import { flow, http, on } from "okengine";
import { z } from "zod";
import { email } from "@/channels/email";

/**
 * POST /trials/start — a durable flow: the step is journaled, the sleep parks the run for 3 days
 * (the request gets 204 at once), and any instance resumes it when it is due, even after a restart.
 */
export const start = on(
  http.post(),
  flow({
    durable: true,
    in: z.object({ email: z.string().email() }),
    do: async ({ email: to }, fx) => {
      await fx.step("start-trial", () => ({ to, startedAt: fx.clock.now() }));
      await fx.clock.sleep("trial-window", "3d");
      await fx.step("remind", () => fx.send(email, { to, subject: "Your trial ends today" }));
    },
  }),
);
