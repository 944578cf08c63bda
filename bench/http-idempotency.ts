/**
 * The cost of the Idempotency-Key lookup: the same POST over a real socket with and without a
 * (fresh, unique) key, on the memory, file and postgres drivers, in alternating segments so load
 * from other processes lands on both alike (same flow, same connections, same body; the key is
 * made before the clock starts for each request). Target: keyed ≥ 0.9× unkeyed. Two flows:
 * `noio` answers without touching the store (the bound: a keyed request must make its answer
 * durable, a request that writes nothing does no I/O); `emit` is the canonical POST /orders, whose
 * flow emits one once signal (a bound consumer takes it). Also reports latency (p50/p99 of all
 * segments), statements per request on postgres and commits (fsyncs) per request on file, and
 * CPU per request (load-independent on a busy machine, unlike req/s): this process's (the app and
 * the load generator, which does the same work for both) and, when PostgreSQL runs on this
 * machine, its backends serving the store's pool (by application_name, from /proc).
 *
 *   node --import tsx bench/http-idempotency.ts
 *   # BENCH_SECONDS (6), BENCH_CONNECTIONS (16; a list like "16,128" runs each),
 *   # BENCH_DRIVERS (memory,file,postgres), BENCH_FLOWS (noio,emit),
 *   # DATABASE_URL (postgres://postgres@127.0.0.1:5432/test; DATABASE_URL_TEST is read too)
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { Agent, request } from "node:http";
import { createRequire } from "node:module";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import type pgTypes from "pg";
import { benchLogger } from "./compare/logger.ts";
import { createApp, flow, http, on, signal } from "../src/index.ts";
import { createFileStore, type FileStore } from "../src/store/file/file-store.ts";
import { createMemoryStore } from "../src/store/memory/memory-store.ts";
import { createPostgresStore } from "../src/store/postgres/postgres-store.ts";
import type { Store } from "../src/store/types.ts";
import { randomName } from "./compare/run-id.ts";

// The pg the store uses (the root's), not bench/node_modules' copy a peer system pulled in:
// patching the wrong copy counted 0 statements.
const pg = createRequire(new URL("../src/store/postgres/", import.meta.url))("pg") as typeof pgTypes;

const SECONDS = Number(process.env.BENCH_SECONDS ?? 6);
const CONNECTION_LIST = (process.env.BENCH_CONNECTIONS ?? "16").split(",").map(Number);
const DRIVERS = (process.env.BENCH_DRIVERS ?? "memory,file,postgres").split(",");
const FLOWS = (process.env.BENCH_FLOWS ?? "noio,emit").split(",") as Array<"noio" | "emit">;
let CONNECTIONS = CONNECTION_LIST[0]!;
const PG_URL =
  process.env.DATABASE_URL ?? process.env.DATABASE_URL_TEST ?? "postgres://postgres@127.0.0.1:5432/test";
const body = JSON.stringify({ sku: "sku-1", qty: 2 });

/** Statements sent to PostgreSQL (round trips), counted at the client: load-independent, unlike req/s. */
let statements = 0;
// eslint-disable-next-line @typescript-eslint/unbound-method -- patched and called with apply(this)
const origQuery = pg.Client.prototype.query as (...a: unknown[]) => unknown;
pg.Client.prototype.query = function (this: pgTypes.Client, ...args: unknown[]): unknown {
  statements++;
  return origQuery.apply(this, args);
} as typeof pg.Client.prototype.query;

function post(port: number, agent: Agent, key: string | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string | number> = {
      "content-type": "application/json",
      "content-length": Buffer.byteLength(body),
    };
    if (key !== undefined) headers["idempotency-key"] = key;
    const req = request(
      { host: "127.0.0.1", port, method: "POST", path: "/orders", agent, headers },
      (res) => {
        res.resume();
        res.on("end", () =>
          res.statusCode === 200 ? resolve() : reject(new Error(`status ${res.statusCode}`)),
        );
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

/** The file store under test, whose commits (one fsync each) are counted like statements. */
let fileStore: FileStore | undefined;
const commits = (): number => fileStore?.diagnostics().commits ?? 0;

/**
 * CPU (µs, user + system) of the PostgreSQL backends serving the store's pool, read from /proc:
 * 0 when the server is not on this machine. Backends are found by the pool's application_name.
 */
let backendPids: () => Promise<number[]> = () => Promise.resolve([]);
const TICK_US = 1e6 / 100; // USER_HZ: 100 on Linux
const procCpu = (pid: number): number => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(f[11]) + Number(f[12])) * TICK_US; // utime, stime
  } catch {
    return 0; // gone, or not on this machine
  }
};
async function backendCpu(): Promise<Map<number, number>> {
  return new Map((await backendPids()).map((pid) => [pid, procCpu(pid)]));
}
const nodeCpu = (): number => {
  const u = process.cpuUsage();
  return u.user + u.system;
};

/** Requests per second for `ms` of closed-loop load with CONNECTIONS in flight. */
let seq = 0;
async function segment(port: number, agent: Agent, keyed: boolean, ms: number): Promise<number> {
  let n = 0;
  const sent = statements;
  const committed = commits();
  const pg0 = await backendCpu();
  const node0 = nodeCpu();
  const into = latencies[keyed ? "keyed" : "plain"];
  const end = Date.now() + ms;
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async () => {
      while (Date.now() < end) {
        const key = keyed ? `bench-${process.pid}-${seq++}` : undefined;
        const t0 = performance.now();
        await post(port, agent, key);
        into.push(performance.now() - t0);
        n++;
      }
    }),
  );
  const side = keyed ? "keyed" : "plain";
  cpuNode[side] += nodeCpu() - node0;
  // A backend that came or went within the segment is counted from 0 or not at all: the pool is warm.
  for (const [pid, after] of await backendCpu()) cpuPg[side] += after - (pg0.get(pid) ?? after);
  served[side] += n;
  perRequest[side].push((statements - sent) / Math.max(1, n));
  commitsPer[side].push((commits() - committed) / Math.max(1, n));
  return n / (ms / 1000);
}
const cpuNode = { plain: 0, keyed: 0 };
const cpuPg = { plain: 0, keyed: 0 };
const served = { plain: 0, keyed: 0 };
const perRequest = { plain: [] as number[], keyed: [] as number[] };
const commitsPer = { plain: [] as number[], keyed: [] as number[] };
const latencies = { plain: [] as number[], keyed: [] as number[] };
let closeAdmin = (): Promise<void> => Promise.resolve();
const pct = (xs: number[], p: number): string =>
  ([...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) * p)] ?? 0).toFixed(2);

async function measure(name: string, store: Store, kind: "noio" | "emit"): Promise<void> {
  const placed = signal.once("orders.placed");
  const create = on(
    http.post("/orders"),
    flow("orders.create", {
      do: async (input: { sku: string }, fx) => {
        const orderId = fx.id();
        if (kind === "emit") await fx.emit(placed, { orderId, sku: input.sku });
        return { orderId, sku: input.sku };
      },
    }),
  );
  const consume = on(placed, flow("orders.placed", { do: () => undefined }));
  const modules = kind === "emit" ? [{ create, consume }] : [{ create }];
  const app = createApp({ env: "test", modules, store, logger: benchLogger() });
  const { port } = await app.start({ port: 0, host: "127.0.0.1" });
  const agent = new Agent({ keepAlive: true, maxSockets: CONNECTIONS });
  if (name === "postgres") {
    const admin = new pg.Client({ connectionString: PG_URL });
    await admin.connect();
    backendPids = async () =>
      (
        await admin.query<{ pid: number }>(
          "SELECT pid FROM pg_stat_activity WHERE application_name = ANY($1::text[])",
          [[`okengine:${schema}`]],
        )
      ).rows.map((r) => r.pid);
    closeAdmin = () => admin.end();
  }
  await segment(port, agent, true, 500); // warm-up (JIT, pool)
  for (const side of ["plain", "keyed"] as const) {
    cpuNode[side] = 0;
    cpuPg[side] = 0;
    served[side] = 0;
  }
  const plain: number[] = [];
  const keyed: number[] = [];
  perRequest.plain = [];
  perRequest.keyed = [];
  commitsPer.plain = [];
  commitsPer.keyed = [];
  latencies.plain = [];
  latencies.keyed = [];
  const rounds = Math.max(1, Math.round(SECONDS / 1));
  for (let i = 0; i < rounds; i++) {
    plain.push(await segment(port, agent, false, 500));
    keyed.push(await segment(port, agent, true, 500));
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const p = median(plain);
  const k = median(keyed);
  const lat = (xs: number[]) => `p50 ${pct(xs, 0.5)} p99 ${pct(xs, 0.99)} ms`;
  const per =
    name === "postgres"
      ? `   statements/request ${median(perRequest.plain).toFixed(2)} / ${median(perRequest.keyed).toFixed(2)}`
      : name === "file"
        ? `   commits/request ${median(commitsPer.plain).toFixed(2)} / ${median(commitsPer.keyed).toFixed(2)}`
        : "";
  const us = (cpu: { plain: number; keyed: number }, side: "plain" | "keyed"): string =>
    (cpu[side] / Math.max(1, served[side])).toFixed(0);
  const cpu =
    `   CPU µs/request node ${us(cpuNode, "plain")} / ${us(cpuNode, "keyed")}` +
    (name === "postgres" ? `, pg backends ${us(cpuPg, "plain")} / ${us(cpuPg, "keyed")}` : "");
  console.log(
    `${kind.padEnd(5)} ${name.padEnd(9)} c${String(CONNECTIONS).padEnd(4)} without key ${p.toFixed(0).padStart(6)} req/s (${lat(latencies.plain)})   with key ${k.toFixed(0).padStart(6)} req/s (${lat(latencies.keyed)})   ratio ${(k / p).toFixed(2)}×${per}${cpu}`,
  );
  await closeAdmin();
  closeAdmin = () => Promise.resolve();
  backendPids = () => Promise.resolve([]);
  agent.destroy();
  await app.stop();
  await store.close(); // a store passed in stays open after app.stop()
  fileStore = undefined;
}

console.log(
  `POST /orders (${FLOWS.join(", ")}), ${CONNECTION_LIST.join("/")} connections, loadavg ${loadavg()
    .map((l) => l.toFixed(1))
    .join(" ")}`,
);
const schema = randomName("oke_bench_idem");
const dir = mkdtempSync(join(tmpdir(), "oke-bench-idem-"));
for (const c of CONNECTION_LIST) {
  CONNECTIONS = c;
  for (const kind of FLOWS) {
    if (DRIVERS.includes("memory")) await measure("memory", createMemoryStore(), kind);
    if (DRIVERS.includes("file")) {
      fileStore = createFileStore({ dir: join(dir, `c${c}-${kind}`) });
      await measure("file", fileStore, kind);
    }
    if (DRIVERS.includes("postgres"))
      await measure("postgres", createPostgresStore({ connectionString: PG_URL, schema }), kind);
  }
}
rmSync(dir, { recursive: true, force: true });
const admin = new pg.Client({ connectionString: PG_URL });
await admin.connect();
await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
await admin.end();
