// A real app process for the spent-run crash test: a durable once consumer (charge with an undo, then ship).
/**
 * Signal "spent.jobs" (retries: 1, so two attempts) consumed by the durable
 * flow "spent.jobs": step "charge" (undo: refund), then step "ship". With
 * OKE_HANG=1 "ship" hangs (the test SIGKILLs the process there). OKE_EMIT=id
 * emits one message with that id. One JSON line per event on stdout, like
 * child-app.ts.
 */
import { pino } from "pino";
import { createApp, flow, on, signal } from "../../src/index.ts";
import { bootUntilSigterm, databaseUrl as url, envStore, leaseMs, say } from "./child-kit.ts";

const store = envStore();
const hang = process.env.OKE_HANG === "1";

const jobs = signal.once("spent.jobs", { retries: 1 });
const consumer = on(
  jobs,
  flow("spent.jobs", {
    durable: true,
    do: async (_: unknown, fx) => {
      await fx.step("charge", () => (say({ event: "charge", id: fx.runId }), "c1"), {
        undo: () => say({ event: "refund", id: fx.runId }),
      });
      await fx.step("ship", async () => {
        say({ event: "ship", id: fx.runId, attempt: fx.attempt });
        if (hang) await new Promise<never>(() => undefined);
        return "s1";
      });
      return "shipped";
    },
  }),
);

const app = createApp({
  modules: [{ consumer }],
  env: "prod",
  store,
  logger: pino({ level: "silent" }),
  config: { database: { url }, signals: { leaseMs }, durable: { leaseMs } },
});
await bootUntilSigterm(app, store);
if (process.env.OKE_EMIT) await app.emit(jobs, {}, { id: process.env.OKE_EMIT });
