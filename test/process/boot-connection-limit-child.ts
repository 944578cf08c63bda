// An app process on PostgreSQL (DATABASE_URL, OKE_SCHEMA) listening on OKE_PORT, for boot-connection-limit.test.ts: its JSON log goes to stdout.
import { pino } from "pino";
import { createApp, every, flow, http, on, signal } from "../../src/index.ts";
import { say } from "./child-kit.ts";

// A route to serve, a clock (boot reconciles schedules), a durable flow (boot scans for orphans) and a
// once consumer: every store call of the boot's phase after open() has something to do.
const ping = on(http.get("/ping"), flow("limit.ping", { do: () => ({ ok: true }) }));
const tick = on(every("1h"), flow("limit.tick", { do: () => undefined }));
const nap = flow("limit.nap", { durable: true, do: () => undefined });
const jobs = signal.once("limit.jobs");
const work = on(jobs, flow("limit.work", { do: () => undefined }));

const app = createApp({
  modules: [{ ping, tick, nap, jobs, work }],
  env: "prod",
  // pino's JSON lines on stdout: spawn.ts's Child reads them as events.
  logger: pino({ level: "info" }),
  config: {
    drivers: { journal: "postgres", send: "memory" },
    database: {
      url: process.env.DATABASE_URL ?? "",
      schema: process.env.OKE_SCHEMA ?? "okengine",
      connectTimeoutMs: 60_000,
    },
    console: { port: false },
  },
});

process.on("SIGTERM", () => {
  void app.stop({ timeoutMs: 2_000 }).then(() => process.exit(0));
});
await app.start({ port: Number(process.env.OKE_PORT), host: "127.0.0.1" });
say({ event: "ready" });
