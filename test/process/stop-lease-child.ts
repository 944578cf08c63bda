// A real app process for the stop-lease test: a durable consumer whose one step, and a plain consumer whose handler, outlast the stop deadline.
/**
 * Signal "stoplease.jobs" (retries: 20, so the message's budget never decides) consumed by the
 * durable flow "stoplease.jobs": one step "long", which waits OKE_STEP_MS (default: forever, a step
 * longer than any stop deadline), then returns. Signal "stoplease.plain" (retries: 0: one attempt,
 * so a counted lapse would dead-letter it) consumed by the plain flow "stoplease.plain", whose
 * handler waits the same way. `shutdownTimeoutMs` from OKE_SHUTDOWN_MS; leases from OKE_LEASE_MS.
 * OKE_EMIT=id emits one message with that id, OKE_PLAIN=id one to the plain signal. Prints JSON
 * lines (spawn.ts): `ready`, `step` (the run id and Date.now() when the step body began),
 * `handler` (the plain message's id and attempt), `stopped` once app.stop()
 * returned. On SIGTERM: app.stop() with its default deadline (as `oke start` does), then the store
 * closes and the process exits 0. Its log (info) goes to stderr.
 */
import { pino } from "pino";
import { createApp, flow, on, signal } from "../../src/index.ts";
import { databaseUrl as url, envStore, leaseMs, say } from "./child-kit.ts";

const store = envStore();
const stepMs = process.env.OKE_STEP_MS === undefined ? undefined : Number(process.env.OKE_STEP_MS);

const jobs = signal.once("stoplease.jobs", { retries: 20 });
const consumer = on(
  jobs,
  flow("stoplease.jobs", {
    durable: true,
    do: async (_: unknown, fx) => {
      await fx.step("long", async () => {
        say({ event: "step", runId: fx.runId, at: Date.now() });
        // No timer when it waits forever: only the stop's own deadline and the test's signal end it.
        await new Promise<void>((r) => (stepMs === undefined ? undefined : setTimeout(r, stepMs)));
        return "done";
      });
      return "ok";
    },
  }),
);

const plain = signal.once("stoplease.plain", { retries: 0 });
const plainConsumer = on(
  plain,
  flow("stoplease.plain", {
    do: async (_: unknown, fx) => {
      say({ event: "handler", id: fx.runId, attempt: fx.attempt });
      await new Promise<void>((r) => (stepMs === undefined ? undefined : setTimeout(r, stepMs)));
    },
  }),
);

const app = createApp({
  modules: [{ jobs, consumer, plain, plainConsumer }],
  env: "prod",
  store,
  logger: pino({ level: "info" }, process.stderr),
  config: {
    database: { url },
    signals: { leaseMs },
    durable: { leaseMs },
    shutdownTimeoutMs: Number(process.env.OKE_SHUTDOWN_MS ?? 10_000),
  },
});
await app.boot();
// Before "ready": a parent that signals on "ready" must find the handler (child-app.ts says why).
process.on("SIGTERM", () => {
  void app.stop().then(async () => {
    say({ event: "stopped" });
    await store.close();
    process.exit(0);
  });
});
say({ event: "ready" });
if (process.env.OKE_EMIT) await app.emit(jobs, {}, { id: process.env.OKE_EMIT });
if (process.env.OKE_PLAIN) await app.emit(plain, {}, { id: process.env.OKE_PLAIN });
