// A real app process for the fan-out tests: two broadcast flows and HTTP routes to emit.
/**
 * A real app process for the fan-out tests: two flows on a broadcast signal
 * (each run recorded in a table), a live order-status route, and HTTP routes to emit. Prints JSON lines
 * like child-app.ts: `ready` (with its port), `stopped`.
 */
import pg from "pg";
import { pino } from "pino";
import { createApp, flow, http, on, signal } from "../../src/index.ts";
import { createPostgresStore } from "../../src/store/postgres/postgres-store.ts";

const say = (event: Record<string, unknown>): void => {
  process.stdout.write(JSON.stringify({ pid: process.pid, ...event }) + "\n");
};

const url = process.env.DATABASE_URL ?? "";
const schema = process.env.OKE_SCHEMA ?? "okengine";
const store = createPostgresStore({ connectionString: url, schema, pollIntervalMs: 500 });
const results = new pg.Pool({ connectionString: url, max: 4 });

const placed = signal.broadcast("orders.placed");
const orderStatus = signal.live("orders.status");
const record = (flowName: string) =>
  flow(flowName, {
    do: async ({ id }: { id: string }) => {
      await results.query(`INSERT INTO "${schema}".fanout_runs (flow, event, pid) VALUES ($1, $2, $3)`, [
        flowName,
        id,
        process.pid,
      ]);
    },
  });

const modules: Record<string, unknown>[] = [
  {
    placed,
    charge: on(placed, record("orders.charge")),
    ship: on(placed, record("orders.ship")),
    orderStatus,
    status: on(
      http.get("/orders/:id/status"),
      flow("orders.status.feed", { do: ({ id }: { id: string }, fx) => fx.live(orderStatus, { key: id }) }),
    ),
    setStatus: on(
      http.post("/orders/:id/status"),
      flow("orders.status.set", {
        do: async ({ id, state }: { id: string; state: string }, fx) =>
          fx.emit(orderStatus, { state }, { key: id }),
      }),
    ),
    emit: on(
      http.post("/emit"),
      flow("emit", {
        do: async ({ ids }: { ids: string[] }, fx) => {
          for (const id of ids) await fx.emit(placed, { id });
        },
      }),
    ),
  },
];

const app = createApp({
  modules,
  env: "prod",
  store,
  logger: pino({ level: process.env.OKE_LOG_LEVEL ?? "silent" }),
  config: { database: { url } },
});

const { port } = await app.start({ port: Number(process.env.OKE_PORT ?? 0), host: "127.0.0.1" });
// Before "ready": a parent that signals on "ready" must find the handler (child-app.ts says why).
const shutdown = (): void => {
  void app.stop({ timeoutMs: 2_000 }).then(async () => {
    await store.close();
    await results.end();
    say({ event: "stopped" });
    process.exit(0);
  });
};
process.on("SIGTERM", shutdown);
process.on("SIGINT", shutdown);
say({ event: "ready", port });
