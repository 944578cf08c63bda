/** One instance of bench/clock-lag.ts: N `every("1s")` clocks; prints one line per handler start and per fireBatch. */
import { monitorEventLoopDelay } from "node:perf_hooks";
import { benchLogger } from "./compare/logger.ts";
import { clock, createApp, flow, on } from "../src/index.ts";
import { createPostgresStore } from "../src/store/postgres/postgres-store.ts";

const n = Number(process.env.CLOCKS ?? 100);
const store = createPostgresStore({
  connectionString: process.env.DATABASE_URL!,
  schema: process.env.OKE_SCHEMA!,
  poolSize: 10,
});
const lines: string[] = [];
// Each fireBatch call of this instance: "F <start> <end> <requests> <won>" (the lag's store part).
const fireBatch = store.fireBatch.bind(store);
store.fireBatch = async (reqs) => {
  const t0 = Date.now();
  const out = await fireBatch(reqs);
  lines.push(`F ${t0} ${Date.now()} ${reqs.length} ${out.filter((x) => x).length}`);
  return out;
};
const modules = [
  Object.fromEntries(
    Array.from({ length: n }, (_, i) => [
      `c${i}`,
      on(
        clock(`bench.c${i}`, { every: "1s" }),
        flow(`bench.c${i}`, {
          do: ({ scheduledAt, firedAt }, fx) => {
            lines.push(`${i} ${scheduledAt} ${Date.now()} ${fx.attempt} ${firedAt}`);
          },
        }),
      ),
    ]),
  ),
];
const app = createApp({
  modules,
  env: "prod",
  store,
  logger: benchLogger(),
  config: {
    console: { port: false },
    database: { url: process.env.DATABASE_URL! },
    signals: { concurrency: 64 },
  },
});
await app.boot();
const delay = monitorEventLoopDelay({ resolution: 5 });
delay.enable();
process.stdout.write("ready\n");
// Batched writes keep stdout off the handler's path.
const flush = setInterval(() => {
  if (lines.length > 0) process.stdout.write(lines.splice(0).join("\n") + "\n");
}, 200);
process.on("SIGTERM", () => {
  void app.stop({ timeoutMs: 2_000 }).then(async () => {
    clearInterval(flush);
    delay.disable();
    // Event-loop delay over the run (ms): "L <p50> <p99> <max>".
    lines.push(`L ${delay.percentile(50) / 1e6} ${delay.percentile(99) / 1e6} ${delay.max / 1e6}`);
    process.stdout.write(lines.splice(0).join("\n") + "\n");
    await store.close();
    process.exit(0);
  });
});
