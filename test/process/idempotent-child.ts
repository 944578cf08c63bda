// A real app process for the idempotency restart test.
/**
 * A real app process serving keyed routes on PostgreSQL (DATABASE_URL + OKE_SCHEMA): each run of
 * a flow inserts a row, so the test counts runs across processes. Prints {"event":"listening","port"}.
 * `/durable-orders` is durable: its first step inserts the row, its second hangs with OKE_HANG=1
 * (printing {"event":"hanging"}). `/gated-orders` waits for the advisory lock OKE_GATE_LOCK (shared)
 * that the test holds, so the test can act between the claim and the answer. On SIGTERM the app
 * stops (printing {"event":"stopped","status"}: OKE_REPORT_KEY's record then), then the store and
 * pool close and the process exits.
 */
import pg from "pg";
import { flow, http, on } from "../../src/index.ts";
import { databaseUrl, envStore, listenOnFreePort, say } from "./child-kit.ts";

const schema = process.env.OKE_SCHEMA ?? "okengine";
const pool = new pg.Pool({ connectionString: databaseUrl, max: 2 });

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

const createDurable = on(
  http.post("/durable-orders"),
  flow("orders.durable", {
    durable: true,
    do: async (input: { sku: string }, fx) => {
      // The row's key is the run id: a second run of this step for the same run would fail on it.
      const orderId = await fx.step("insert", async () => {
        await pool.query(`INSERT INTO "${schema}".orders (order_id, sku, pid) VALUES ($1, $2, $3)`, [
          fx.runId,
          input.sku,
          process.pid,
        ]);
        return fx.runId;
      });
      await fx.step("confirm", async () => {
        if (process.env.OKE_HANG !== "1") return;
        say({ event: "hanging", runId: fx.runId });
        await new Promise<never>(() => undefined);
      });
      return { orderId };
    },
  }),
);

const createGated = on(
  http.post("/gated-orders"),
  flow("orders.gated", {
    do: async (input: { sku: string }) => {
      // Transaction-scoped: taken once the test lets go, released when the statement ends.
      await pool.query("SELECT pg_advisory_xact_lock_shared($1)", [Number(process.env.OKE_GATE_LOCK ?? 0)]);
      return { sku: input.sku, pid: process.pid };
    },
  }),
);

const store = envStore();
const app = await listenOnFreePort([{ create, createDurable, createGated }], store);
process.once("SIGTERM", () => {
  void app
    .stop()
    .then(async () => {
      // What the store holds for OKE_REPORT_KEY once stop() returned (it must not return earlier).
      const key = process.env.OKE_REPORT_KEY;
      const record = key === undefined ? undefined : await store.getIdempotencyKey(key);
      say({ event: "stopped", status: record?.status });
      await store.close();
      await pool.end();
    })
    .catch((e: unknown) => say({ event: "stop failed", err: String(e) }));
});
