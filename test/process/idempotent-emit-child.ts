// A real app process for the keyed-emit takeover test: a plain keyed route that emits, then may hang.
/**
 * Serves POST /emit-orders, a plain (non-durable) flow that emits one `orders.placed` once
 * message, one `orders.seen` broadcast and one `orders.live` tape entry, then answers — or, with
 * OKE_HANG=1, prints {"event":"hanging","runId"} after the emits and never answers. The store is
 * PostgreSQL (DATABASE_URL + OKE_SCHEMA) or the file driver (OKE_FILE_DIR). Consumers are bound
 * (an emit needs one); the test counts the stored messages, whatever their status.
 */
import { flow, http, on, signal } from "../../src/index.ts";
import { envStore, listenOnFreePort, say } from "./child-kit.ts";

const placed = signal.once("orders.placed", { retries: 0 });
const seen = signal.broadcast("orders.seen");
const live = signal.live("orders.live");

const create = on(
  http.post("/emit-orders"),
  flow("orders.emit", {
    do: async (input: { sku: string }, fx) => {
      await fx.emit(placed, { sku: input.sku });
      await fx.emit(seen, { sku: input.sku });
      await fx.emit(live, { sku: input.sku });
      if (process.env.OKE_HANG === "1") {
        say({ event: "hanging", runId: fx.runId });
        await new Promise<never>(() => undefined);
      }
      return { sku: input.sku, pid: process.pid };
    },
  }),
);
const consume = on(placed, flow("orders.placed.consume", { do: () => undefined }));
const watch = on(seen, flow("orders.seen.watch", { do: () => undefined }));

await listenOnFreePort([{ create, consume, watch }], envStore());
