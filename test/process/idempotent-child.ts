// A real app process for the idempotency restart test.
/**
 * A real app process serving one keyed route on PostgreSQL (DATABASE_URL + OKE_SCHEMA): each run of
 * the flow inserts a row, so the test counts runs across processes. Prints {"event":"listening","port"}.
 */
import pg from "pg";
import { pino } from "pino";
import { createApp, flow, http, on } from "../../src/index.ts";
import { createPostgresStore } from "../../src/store/postgres/postgres-store.ts";

const url = process.env.DATABASE_URL ?? "";
const schema = process.env.OKE_SCHEMA ?? "okengine";
const pool = new pg.Pool({ connectionString: url, max: 2 });

const create = on(
  http.post("/orders"),
  flow("orders.create", {
    do: async (input: { sku: string }, fx) => {
      const orderId = fx.id();
      await pool.query(`INSERT INTO "${schema}".orders (order_id, sku, pid) VALUES ($1, $2, $3)`, [
        orderId,
        input.sku,
        process.pid,
      ]);
      return { orderId, pid: process.pid };
    },
  }),
);

const app = createApp({
  env: "test",
  modules: [{ create }],
  store: createPostgresStore({ connectionString: url, schema }),
  logger: pino({ level: "silent" }),
});
const { port } = await app.start({ port: 0, host: "127.0.0.1" });
process.stdout.write(JSON.stringify({ pid: process.pid, event: "listening", port }) + "\n");
