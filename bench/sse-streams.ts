/**
 * One instance holding N open SSE streams on one live tape (PostgreSQL store):
 * memory per stream (RSS and heap after GC, before vs after the streams open)
 * and emit → last-client latency (the clients run in a child process).
 *
 *   node --expose-gc --import tsx bench/sse-streams.ts [streams=10000] [emits=50]
 */
import { spawn } from "node:child_process";
import { loadavg } from "node:os";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { benchLogger } from "./compare/logger.ts";
import { createApp, flow, http, on, signal } from "../src/index.ts";
import { createPostgresStore } from "../src/store/postgres/postgres-store.ts";
import { randomName } from "./compare/run-id.ts";

const [streams = 10_000, emits = 50] = process.argv.slice(2).map(Number);
const url = process.env.BENCH_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const schema = randomName("oke_bench_sse");
const admin = new pg.Pool({ connectionString: url, max: 1 });
await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
const store = createPostgresStore({ connectionString: url, schema });
const feed = signal.live("bench.feed");
const route = on(http.get("/feed"), flow("bench.feed.route", { do: (_: unknown, fx) => fx.live(feed) }));
const app = createApp({
  modules: [{ feed, route }],
  env: "prod",
  store,
  logger: benchLogger(),
  config: {
    console: { port: false },
    database: { url },
    live: { maxConnections: streams + 10 },
    http: { maxConnections: streams + 100 },
  },
});
const { port } = await app.start({ port: 0, host: "127.0.0.1" });
const wall = (): number => performance.timeOrigin + performance.now();
await app.emit(feed, { i: -1, t: wall() });
const gc = (globalThis as { gc?: () => void }).gc;
const mem = (): { rss: number; heap: number } => {
  gc?.();
  const m = process.memoryUsage();
  return { rss: m.rss, heap: m.heapUsed };
};
const before = mem();
const child = spawn(
  process.execPath,
  ["--import", "tsx", fileURLToPath(new URL("./sse-clients.ts", import.meta.url))],
  {
    env: { ...process.env, PORT: String(port), STREAMS: String(streams) },
    stdio: ["ignore", "pipe", "inherit"],
  },
);
const lat = new Map<number, number>();
let waiter: (() => void) | undefined;
await new Promise<void>((resolve) => {
  createInterface({ input: child.stdout }).on("line", (line) => {
    if (line === "open") return resolve();
    const [i, ms] = line.split(" ").map(Number);
    lat.set(i!, ms!);
    waiter?.();
  });
});
await new Promise((r) => setTimeout(r, 1_000)); // let the history replay settle before measuring
const after = mem();
const load0 = loadavg()[0]!;
for (let i = 0; i < emits; i++) {
  const got = new Promise<void>((r) => (waiter = r));
  await app.emit(feed, { i, t: wall() });
  while (!lat.has(i)) await got;
}
const l = [...lat.values()].sort((x, y) => x - y);
const pct = (p: number): number => l[Math.min(l.length - 1, Math.floor((p / 100) * l.length))]!;
console.log(
  JSON.stringify({
    bench: "one instance, N SSE streams on one tape (PostgreSQL), clients in another process",
    streams,
    openStreams: (app as unknown as { sse: { size: number } }).sse.size,
    rssPerStreamBytes: Math.round((after.rss - before.rss) / streams),
    heapPerStreamBytes: Math.round((after.heap - before.heap) / streams),
    emits,
    lastClientP50Ms: +pct(50).toFixed(1),
    lastClientP99Ms: +pct(99).toFixed(1),
    loadavg1: [load0, loadavg()[0]],
  }),
);
child.kill("SIGTERM");
await app.stop({ timeoutMs: 5_000 });
await store.close();
await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
await admin.end();
