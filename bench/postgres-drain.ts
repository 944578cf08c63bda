/**
 * The postgres driver under load, in one process against a real PostgreSQL:
 *
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/test node --import tsx bench/postgres-drain.ts [filter]
 *
 * (`filter`: run only the scenarios whose label contains it, e.g. `unkeyed`.)
 *
 * 1. Drain: 100 000 no-op messages at concurrency 32, the way a worker pool
 *    runs — one claim loop taking up to the free slots, handlers that finish
 *    at once, and a settle loop that flushes every finished outcome in one
 *    batched statement while the next claim is in flight. Also a keyed run
 *    (100 000 messages over 1 000 keys) and a hot-key run (10 000 messages
 *    over 8 keys, fewer keys than slots: the blocked backlog is what a claim
 *    must skip). Prints the average claim and settle round trip too.
 * 2. Latency: 1 000 sequential emits from one store instance, each claimed by
 *    another instance woken through LISTEN/NOTIFY; p50/p99 of emit-start to
 *    claim-returned. Then the same through in-process events (one instance).
 *
 * Each scenario runs on a fresh schema, dropped afterwards.
 */
import { randomName } from "./compare/run-id.ts";
import pg from "pg";
import { createPostgresStore } from "../src/store/postgres/postgres-store.ts";
import type { NewMessage } from "../src/store/types.ts";
import { drain } from "./store-drain.ts";

const URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const NOW = 1_700_000_000_000;
const LEASE = 30_000;
const CONCURRENCY = 32;

const schemaName = (): string => randomName("oke_bench");

async function dropSchema(schema: string): Promise<void> {
  const c = new pg.Client({ connectionString: URL });
  await c.connect();
  await c.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await c.end();
}

function messages(n: number, keys: number): NewMessage[] {
  return Array.from({ length: n }, (_, i) => ({
    id: `m${i}`,
    signal: "bench",
    key: keys === 0 ? null : `k${i % keys}`,
    payload: { n: i },
    parentRunId: null,
  }));
}

async function drainScenario(label: string, n: number, keys: number): Promise<void> {
  const schema = schemaName();
  const store = createPostgresStore({
    connectionString: URL,
    schema,
    poolSize: 4,
    pollIntervalMs: 3_600_000,
  });
  await store.open();
  try {
    const all = messages(n, keys);
    const t0 = performance.now();
    for (let i = 0; i < n; i += 1_000) await store.enqueue(all.slice(i, i + 1_000), NOW);
    const t1 = performance.now();
    const { claims, settles, claimMs, settleMs } = await drain(store, n, CONCURRENCY, NOW);
    const t2 = performance.now();
    const stats = await store.stats("bench", NOW);
    if (stats.delivered !== n || stats.pending !== 0 || stats.inflight !== 0)
      throw new Error(`bench: ${JSON.stringify(stats)}`);
    const rate = (count: number, ms: number): string =>
      `${Math.round((count / ms) * 1000).toLocaleString("en")}/s`;
    console.log(
      `${label.padEnd(34)} enqueue ${rate(n, t1 - t0).padStart(9)}  drain ${rate(n, t2 - t1).padStart(9)}` +
        `  (${(t2 - t1).toFixed(0)} ms; ${claims} claims avg ${(claimMs / claims).toFixed(2)} ms;` +
        ` ${settles} settles avg ${(settleMs / settles).toFixed(2)} ms, ${(n / settles).toFixed(1)} per settle)`,
    );
  } finally {
    await store.close();
    await dropSchema(schema);
  }
}

const pct = (sorted: number[], p: number): number =>
  sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;

async function latencyScenario(label: string, crossInstance: boolean, n = 1_000): Promise<void> {
  const schema = schemaName();
  const producer = createPostgresStore({
    connectionString: URL,
    schema,
    poolSize: 2,
    pollIntervalMs: 3_600_000,
  });
  await producer.open();
  const consumer = crossInstance
    ? createPostgresStore({ connectionString: URL, schema, poolSize: 2, pollIntervalMs: 3_600_000 })
    : producer;
  await consumer.open();
  let claimed: ((at: number) => void) | undefined;
  let busy = false;
  const check = async (): Promise<void> => {
    if (busy) return;
    busy = true;
    try {
      const got = await consumer.claim({ signal: "lat", worker: "c", max: 1, now: NOW, leaseMs: LEASE });
      const at = performance.now();
      if (got.length > 0) {
        claimed?.(at);
        await consumer.settle(
          [{ id: got[0]!.id, worker: "c", attempt: got[0]!.attempts, status: "delivered" }],
          NOW,
        );
      }
    } finally {
      busy = false;
    }
  };
  const stop = consumer.subscribe((e) => {
    if (e.kind === "enqueued" && e.signal === "lat") void check();
  });
  const samples: number[] = [];
  try {
    for (let i = 0; i < n; i++) {
      const got = new Promise<number>((resolve) => (claimed = resolve));
      const t0 = performance.now();
      await producer.enqueue(
        [{ id: `l${i}`, signal: "lat", key: null, payload: { i }, parentRunId: null }],
        NOW,
      );
      samples.push((await got) - t0);
      while (busy) await new Promise((r) => setImmediate(r)); // let the settle finish before the next emit
    }
  } finally {
    stop();
    await producer.close();
    if (crossInstance) await consumer.close();
    await dropSchema(schema);
  }
  samples.sort((a, b) => a - b);
  console.log(
    `${label.padEnd(34)} p50 ${pct(samples, 50).toFixed(2)} ms  p99 ${pct(samples, 99).toFixed(2)} ms  max ${samples.at(-1)!.toFixed(2)} ms`,
  );
}

async function main(): Promise<void> {
  const c = new pg.Client({ connectionString: URL });
  await c.connect();
  const { rows } = await c.query<{ v: string }>("SELECT current_setting('server_version') AS v");
  await c.end();
  console.log(
    `postgres-drain: PostgreSQL ${rows[0]!.v}, node ${process.version}, concurrency ${CONCURRENCY}`,
  );
  // `node … bench/postgres-drain.ts keyed` runs only the scenarios whose label contains "keyed".
  const only = process.argv[2];
  const run = (label: string): boolean => only === undefined || label.includes(only);
  if (run("unkeyed 100 000")) await drainScenario("unkeyed 100 000", 100_000, 0);
  if (run("keyed 100 000 over 1 000 keys"))
    await drainScenario("keyed 100 000 over 1 000 keys", 100_000, 1_000);
  if (run("hot keys 10 000 over 8 keys")) await drainScenario("hot keys 10 000 over 8 keys", 10_000, 8);
  if (run("latency via LISTEN (2 instances)"))
    await latencyScenario("latency via LISTEN (2 instances)", true);
  if (run("latency in-process (1 instance)")) await latencyScenario("latency in-process (1 instance)", false);
}

await main();
