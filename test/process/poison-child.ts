// A real app process for the poison-run test: a durable once consumer whose second step SIGKILLs its own process.
/**
 * Signal "poison.jobs" (retries: 20, so the message's budget never decides)
 * consumed by the durable flow "poison.jobs": step "charge" (undo: refund),
 * then step "boom", which kills the process with SIGKILL every time it runs
 * (a step that OOMs or segfaults). Each step body and undo appends a line to
 * OKE_TRACE (synchronously, before the kill) so the test counts what ran.
 * `durable.maxRecoveries` from OKE_MAX_RECOVERIES. OKE_EMIT=id emits one
 * message with that id; OKE_NAP (e.g. "300ms") sleeps between the two steps. Events as JSON lines
 * on stdout, like child-app.ts.
 */
import { appendFileSync } from "node:fs";
import { pino } from "pino";
import { createApp, flow, on, signal, type Duration } from "../../src/index.ts";
import { bootUntilSigterm, databaseUrl as url, envStore, leaseMs } from "./child-kit.ts";

const trace = (what: string, id: string): void =>
  appendFileSync(process.env.OKE_TRACE ?? "", `${what} ${id} ${process.pid}\n`);

const store = envStore();
const maxRecoveries = Number(process.env.OKE_MAX_RECOVERIES ?? 10);

const jobs = signal.once("poison.jobs", { retries: 20 });
const consumer = on(
  jobs,
  flow("poison.jobs", {
    durable: true,
    do: async (_: unknown, fx) => {
      await fx.step("charge", () => (trace("charge", fx.runId), "c1"), {
        undo: () => trace("refund", fx.runId),
      });
      // OKE_NAP: a sleep right before the poison step, so each death comes just after a wake.
      if (process.env.OKE_NAP) await fx.clock.sleep("nap", process.env.OKE_NAP as Duration);
      await fx.step("boom", () => {
        trace("boom", fx.runId);
        process.kill(process.pid, "SIGKILL");
        return "never";
      });
      return "done";
    },
  }),
);

const app = createApp({
  modules: [{ consumer }],
  env: "prod",
  store,
  logger: pino({ level: "error" }, process.stderr),
  config: { database: { url }, signals: { leaseMs }, durable: { leaseMs, maxRecoveries } },
});
await bootUntilSigterm(app, store);
if (process.env.OKE_EMIT) await app.emit(jobs, {}, { id: process.env.OKE_EMIT });
