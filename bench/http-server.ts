/**
 * One server process for bench/http-bench.ts: `raw` (node:http by hand) or
 * `oke` (an okengine app). Both do the same work per request: parse the JSON
 * body, validate it with the same zod schema, answer the same envelope.
 * Prints {"port":N} once listening.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { z } from "zod";
import { createApp, flow, http, on } from "../src/index.ts";
import { benchLogger } from "./compare/logger.ts";

const Order = z.object({
  name: z.string().min(1),
  count: z.number().int().positive(),
  tags: z.array(z.string()),
});
const ITEM = { id: "item-1", name: "widget", price: 12.5 };

async function startRaw(): Promise<number> {
  const send = (res: import("node:http").ServerResponse, status: number, body: string): void => {
    res.writeHead(status, {
      "content-type": "application/json; charset=utf-8",
      "content-length": Buffer.byteLength(body),
    });
    res.end(body);
  };
  const server = createServer((req, res) => {
    if (req.method === "GET" && req.url === "/item")
      return send(res, 200, JSON.stringify({ ok: true, data: ITEM }));
    if (req.method !== "POST" || req.url !== "/echo") return send(res, 404, '{"ok":false}');
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      let input: unknown;
      try {
        input = JSON.parse(Buffer.concat(chunks).toString("utf8"));
      } catch {
        return send(res, 400, '{"ok":false}');
      }
      const r = Order.safeParse(input);
      if (!r.success) return send(res, 422, JSON.stringify({ ok: false, error: { issues: r.error.issues } }));
      send(res, 200, JSON.stringify({ ok: true, data: r.data }));
    });
  });
  server.keepAliveTimeout = 72_000;
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return (server.address() as AddressInfo).port;
}

async function startOke(): Promise<number> {
  const app = createApp({
    env: "test",
    logger: benchLogger(),
    config: { drivers: { journal: "memory", send: "memory" } },
    modules: [
      {
        exports: {
          echo: on(http.post({ path: "/echo" }), flow("bench.echo", { in: Order, do: (order) => order })),
          item: on(http.get("/item"), flow("bench.item", { do: () => ITEM })),
        },
      },
    ],
  });
  const { port } = await app.start({ port: 0, host: "127.0.0.1" });
  process.on("SIGTERM", () => void app.stop().finally(() => process.exit(0)));
  return port;
}

const kind = process.argv[2];
if (kind !== "raw" && kind !== "oke") throw new Error("usage: http-server.ts raw|oke");
const port = kind === "raw" ? await startRaw() : await startOke();
// The bench asks for CPU time at the start and end of the measured window: CPU per request is
// steadier than requests/s on a shared machine.
process.on("message", () => process.send?.(process.cpuUsage()));
process.stdout.write(`${JSON.stringify({ port })}\n`);
