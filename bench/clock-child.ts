/** One instance of bench/clock-lag.ts: N `every("1s")` clocks; prints one line per handler start. */
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
const modules = [
  Object.fromEntries(
    Array.from({ length: n }, (_, i) => [
      `c${i}`,
      on(
        clock(`bench.c${i}`, { every: "1s" }),
        flow(`bench.c${i}`, {
          do: ({ scheduledAt }, fx) => {
            lines.push(`${i} ${scheduledAt} ${Date.now()} ${fx.attempt}`);
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
  config: { database: { url: process.env.DATABASE_URL! }, signals: { concurrency: 64 } },
});
await app.boot();
process.stdout.write("ready\n");
// Batched writes keep stdout off the handler's path.
const flush = setInterval(() => {
  if (lines.length > 0) process.stdout.write(lines.splice(0).join("\n") + "\n");
}, 200);
process.on("SIGTERM", () => {
  void app.stop({ timeoutMs: 2_000 }).then(async () => {
    clearInterval(flush);
    if (lines.length > 0) process.stdout.write(lines.splice(0).join("\n") + "\n");
    await store.close();
    process.exit(0);
  });
});
