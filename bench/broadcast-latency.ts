/**
 * Broadcast emit → handler latency across two instances on one PostgreSQL:
 * instance A (this process) emits, instance B (a child process) runs the only
 * bound flow. Latency = B's handler start − A's emit call (same host, wall clock).
 *
 *   node --import tsx bench/broadcast-latency.ts [events=500]
 *
 * Env: BENCH_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test).
 */
import { spawn } from "node:child_process";
import { loadavg } from "node:os";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { benchLogger } from "./compare/logger.ts";
import { createApp, signal } from "../src/index.ts";
import { createPostgresStore } from "../src/store/postgres/postgres-store.ts";
import { randomName } from "./compare/run-id.ts";

const [events = 500] = process.argv.slice(2).map(Number);
const url = process.env.BENCH_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const schema = randomName("oke_bench_bcast");
const admin = new pg.Pool({ connectionString: url, max: 1 });
await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);

const child = spawn(
  process.execPath,
  ["--import", "tsx", fileURLToPath(new URL("./broadcast-child.ts", import.meta.url))],
  {
    env: { ...process.env, DATABASE_URL: url, OKE_SCHEMA: schema },
    stdio: ["ignore", "pipe", "inherit"],
  },
);
const arrivals = new Map<number, number>();
let waiter: (() => void) | undefined;
await new Promise<void>((resolve) => {
  createInterface({ input: child.stdout }).on("line", (line) => {
    if (line === "ready") return resolve();
    const [i, t, at] = line.split(" ").map(Number);
    arrivals.set(i!, at! - t!);
    waiter?.();
  });
});

const ping = signal.broadcast("bench.ping");
const store = createPostgresStore({ connectionString: url, schema });
const a = createApp({
  modules: [{ ping }],
  env: "prod",
  store,
  logger: benchLogger(),
  config: { console: { port: false }, database: { url } },
});
await a.boot();
const wall = (): number => performance.timeOrigin + performance.now();
const load0 = loadavg()[0]!;
// One at a time: each latency is an unloaded emit → handler path.
for (let i = 0; i < events; i++) {
  const got = new Promise<void>((r) => (waiter = r));
  await a.emit(ping, { i, t: wall() });
  while (!arrivals.has(i)) await got;
}
const lat = [...arrivals.values()].sort((x, y) => x - y);
const pct = (p: number): number => lat[Math.min(lat.length - 1, Math.floor((p / 100) * lat.length))]!;
console.log(
  JSON.stringify({
    bench: "broadcast emit → handler, 2 instances (A emits, B runs the flow), PostgreSQL",
    events,
    p50Ms: +pct(50).toFixed(2),
    p99Ms: +pct(99).toFixed(2),
    maxMs: +lat.at(-1)!.toFixed(2),
    loadavg1: [load0, loadavg()[0]],
  }),
);
child.kill("SIGTERM");
await a.stop();
await store.close();
await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
await admin.end();
