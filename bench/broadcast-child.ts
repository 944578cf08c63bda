/** Instance B of bench/broadcast-latency.ts: runs the broadcast flow and prints each event's arrival time. */
import { benchLogger } from "./compare/logger.ts";
import { createApp, flow, on, signal } from "../src/index.ts";
import { createPostgresStore } from "../src/store/postgres/postgres-store.ts";

const url = process.env.DATABASE_URL!;
const store = createPostgresStore({ connectionString: url, schema: process.env.OKE_SCHEMA! });
const ping = signal.broadcast("bench.ping");
const wall = (): number => performance.timeOrigin + performance.now();
const sink = on(
  ping,
  flow("bench.sink", {
    do: ({ i, t }: { i: number; t: number }) => void process.stdout.write(`${i} ${t} ${wall()}\n`),
  }),
);
const app = createApp({
  modules: [{ ping, sink }],
  env: "prod",
  store,
  logger: benchLogger(),
  config: { console: { port: false }, database: { url } },
});
await app.boot();
process.stdout.write("ready\n");
process.on(
  "SIGTERM",
  () =>
    void app
      .stop()
      .then(() => store.close())
      .then(() => process.exit(0)),
);
