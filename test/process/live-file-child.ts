// A real app process on the file driver with a live order-status route, for the SIGKILL-and-resume test.
/**
 * Store: the file driver in OKE_FILE_DIR. Routes: `GET /orders/:id/status`
 * (the tape as SSE) and `POST /orders/:id/status` (appends `{ state }`).
 * Prints JSON lines like child-app.ts: `ready` (with its port), `stopped`.
 */
import { pino } from "pino";
import { createApp, flow, http, on, signal } from "../../src/index.ts";
import { createFileStore } from "../../src/store/file/file-store.ts";

const say = (event: Record<string, unknown>): void => {
  process.stdout.write(JSON.stringify({ pid: process.pid, ...event }) + "\n");
};

const store = createFileStore({ dir: process.env.OKE_FILE_DIR! });
const orderStatus = signal.live("orders.status");
const app = createApp({
  modules: [
    {
      orderStatus,
      status: on(
        http.get("/orders/:id/status"),
        flow("orders.status.feed", {
          do: ({ id }: { id: string }, fx) => fx.live(orderStatus, { key: id }),
        }),
      ),
      setStatus: on(
        http.post("/orders/:id/status"),
        flow("orders.status.set", {
          do: async ({ id, state }: { id: string; state: string }, fx) =>
            fx.emit(orderStatus, { state }, { key: id }),
        }),
      ),
    },
  ],
  env: "prod",
  store,
  config: { drivers: { journal: "file" } },
  logger: pino({ level: process.env.OKE_LOG_LEVEL ?? "silent" }),
});

const { port } = await app.start({ port: Number(process.env.OKE_PORT ?? 0), host: "127.0.0.1" });
// Before "ready": a parent that signals on "ready" must find the handler (child-app.ts says why).
process.on("SIGTERM", () => {
  void app.stop({ timeoutMs: 2_000 }).then(async () => {
    await store.close();
    say({ event: "stopped" });
    process.exit(0);
  });
});
say({ event: "ready", port });
