// A real app process for the call-crash test: a durable parent that fx.calls a durable child whose step can SIGKILL its own process.
/**
 * Flows "calls.parent" (durable: calls "calls.child", journals its result in step "after", returns
 * it) and "calls.child" (durable: step "work" appends `work <runId> <pid>` to OKE_TRACE, then, with
 * OKE_KILL_IN_WORK=1, SIGKILLs the process — it died inside the parent's call). OKE_INVOKE=1 starts
 * one parent run after boot. `durable.maxRecoveries` from OKE_MAX_RECOVERIES. Events as JSON lines.
 */
import { appendFileSync } from "node:fs";
import { pino } from "pino";
import { createApp, flow } from "../../src/index.ts";
import { bootUntilSigterm, databaseUrl as url, envStore, leaseMs, say } from "./child-kit.ts";

const store = envStore();
const maxRecoveries = Number(process.env.OKE_MAX_RECOVERIES ?? 10);

const child = flow("calls.child", {
  durable: true,
  do: async (_: unknown, fx) =>
    fx.step("work", () => {
      appendFileSync(process.env.OKE_TRACE ?? "", `work ${fx.runId} ${process.pid}\n`);
      if (process.env.OKE_KILL_IN_WORK === "1") process.kill(process.pid, "SIGKILL");
      return `work-${process.pid}`;
    }),
});
const parent = flow("calls.parent", {
  durable: true,
  do: async (_: unknown, fx) => {
    const got = await fx.call(child, {});
    await fx.step("after", () => got);
    return got;
  },
});

const app = createApp({
  modules: [{ parent, child }],
  env: "prod",
  store,
  logger: pino({ level: "error" }, process.stderr),
  config: { database: { url }, durable: { leaseMs, maxRecoveries } },
});
await bootUntilSigterm(app, store);
if (process.env.OKE_INVOKE === "1") say({ event: "returned", value: await app.invoke(parent, {}) });
