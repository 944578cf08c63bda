// A real app process for the compensation crash test (flow "orders.place" and its undos).
/**
 * A real app process for the compensation crash test: flow "orders.place"
 * reserves, charges, then fails to ship; its undos refund, then release. With
 * OKE_HANG=1 the release hangs (the test SIGKILLs the process there). One JSON
 * line per event on stdout, like child-app.ts.
 */
import { pino } from "pino";
import { createApp, flow } from "../../src/index.ts";
import { createPostgresStore } from "../../src/store/postgres/postgres-store.ts";

const say = (event: Record<string, unknown>): void => {
  process.stdout.write(JSON.stringify({ pid: process.pid, ...event }) + "\n");
};

const url = process.env.DATABASE_URL ?? "";
const store = createPostgresStore({ connectionString: url, schema: process.env.OKE_SCHEMA ?? "okengine" });
const hang = process.env.OKE_HANG === "1";

const place = flow("orders.place", {
  durable: true,
  do: async ({ id }: { id: string }, fx) => {
    await fx.step("reserve", () => (say({ event: "reserve", id }), "r1"), {
      undo: async () => {
        say({ event: "release", id, status: (await store.getRun(fx.runId))?.status });
        if (hang) await new Promise<never>(() => undefined);
      },
    });
    await fx.step("charge", () => (say({ event: "charge", id }), "c1"), {
      undo: () => say({ event: "refund", id }),
    });
    await fx.step("ship", () => {
      throw new Error("no stock");
    });
  },
});

const leaseMs = Number(process.env.OKE_LEASE_MS ?? 30_000);
const app = createApp({
  modules: [{ place }],
  env: "prod",
  store,
  logger: pino({ level: "silent" }),
  config: { database: { url }, durable: { leaseMs } },
});
await app.boot();
say({ event: "ready" });
if (process.env.OKE_INVOKE) {
  app.invoke("orders.place", { id: process.env.OKE_INVOKE }).catch((e: unknown) => {
    say({ event: "failed", error: e instanceof Error ? e.message : String(e) });
  });
}
process.on("SIGTERM", () => {
  void app.stop({ timeoutMs: 2_000 }).then(async () => {
    await store.close();
    process.exit(0);
  });
});
