/**
 * End-to-end drain through a whole app on the memory driver: worker pool,
 * claim batches, fx per message, batched settle. Complements
 * memory-drain.ts, which measures the engine alone.
 *
 *   node --import tsx bench/app-drain.ts [count] [memory|postgres] [concurrency] [prefetch]
 */
import { benchLogger } from "./compare/logger.ts";
import { createApp, flow, on, signal } from "../src/index.ts";
import pg from "pg";
import { createMemoryStore } from "../src/store/memory/memory-store.ts";
import { createPostgresStore } from "../src/store/postgres/postgres-store.ts";
import type { Store } from "../src/store/types.ts";
import { newId } from "../src/id.ts";
import { randomName } from "./compare/run-id.ts";

const count = Number(process.argv[2] ?? 200_000);
const driver = process.argv[3] ?? "memory";
const concurrencyArg = Number(process.argv[4] ?? 256);
const prefetchArg = process.argv[5] === undefined ? undefined : Number(process.argv[5]);
const URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const schema = randomName("oke_bench_drain");

function makeStore(): Store {
  return driver === "postgres"
    ? createPostgresStore({ connectionString: URL, schema, poolSize: 10 })
    : createMemoryStore();
}

async function dropSchema(): Promise<void> {
  if (driver !== "postgres") return;
  const c = new pg.Client({ connectionString: URL });
  await c.connect();
  await c.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await c.end();
}
const logger = benchLogger();

async function drain(label: string, keys: number, concurrency: number): Promise<number> {
  const jobs = signal.once("bench.noop");
  let done = 0;
  const w = on(jobs, flow("bench.noop", { do: () => void done++ }));
  await dropSchema();
  const store = makeStore();
  const app = createApp({
    modules: [{ w }],
    env: "test",
    store,
    logger,
    config: { signals: { concurrency, ...(prefetchArg === undefined ? {} : { prefetch: prefetchArg }) } },
  });
  await store.open();
  const now = Date.now();
  for (let i = 0; i < count; i += 10_000) {
    const batch = [];
    for (let j = i; j < Math.min(count, i + 10_000); j++) {
      batch.push({
        id: newId(now),
        signal: "bench.noop",
        key: keys > 0 ? `k${j % keys}` : null,
        payload: { j },
        parentRunId: null,
      });
    }
    await store.enqueue(batch, now);
  }
  const t0 = performance.now();
  await app.boot();
  await app.idle({ timeoutMs: 600_000 });
  const ms = performance.now() - t0;
  await app.stop();
  await store.close();
  if (done !== count) throw new Error(`${label}: ${done} of ${count} handled`);
  const rate = Math.round(count / (ms / 1000));
  console.log(`${label.padEnd(44)} ${rate.toLocaleString("en").padStart(10)} msg/s  (${ms.toFixed(0)} ms)`);
  return rate;
}

const tag = `${driver}, concurrency ${concurrencyArg}, prefetch ${prefetchArg ?? concurrencyArg}`;
const unkeyed = await drain(`${count} unkeyed (${tag})`, 0, concurrencyArg);
const keyed = await drain(`${count / 20} keys x 20 (${tag})`, count / 20, concurrencyArg);
console.log(`keyed / unkeyed = ${(keyed / unkeyed).toFixed(2)}`);
await dropSchema();
