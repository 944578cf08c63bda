// A real app process for the compensation crash test (flow "orders.place" and its undos).
/**
 * A real app process for the compensation crash test: flow "orders.place"
 * reserves, charges, then fails to ship; its undos refund, then release. With
 * OKE_HANG=1 the release hangs (the test SIGKILLs the process there). One JSON
 * line per event on stdout, like child-app.ts.
 */
import { pino } from "pino";
import { createApp, flow } from "../../src/index.ts";
import { bootUntilSigterm, databaseUrl as url, envStore, leaseMs, say } from "./child-kit.ts";

const store = envStore();
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

const app = createApp({
  modules: [{ place }],
  env: "prod",
  store,
  logger: pino({ level: "silent" }),
  config: { database: { url }, durable: { leaseMs } },
});
await bootUntilSigterm(app, store);
if (process.env.OKE_INVOKE) {
  app.invoke("orders.place", { id: process.env.OKE_INVOKE }).catch((e: unknown) => {
    say({ event: "failed", error: e instanceof Error ? e.message : String(e) });
  });
}
