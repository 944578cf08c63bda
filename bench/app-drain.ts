/**
 * End-to-end drain through a whole app on the memory driver: worker pool,
 * claim batches, fx per message, batched settle. Complements
 * memory-drain.ts, which measures the engine alone.
 *
 *   node --import tsx bench/app-drain.ts [count]
 */
import { pino } from "pino";
import { createApp, flow, on, signal } from "../src/index.ts";
import { createMemoryStore } from "../src/store/memory/memory-store.ts";
import { newId } from "../src/id.ts";

const count = Number(process.argv[2] ?? 200_000);
const logger = pino({ level: "silent" });

async function drain(label: string, keys: number, concurrency: number): Promise<number> {
  const jobs = signal.once("bench.noop");
  let done = 0;
  const w = on(jobs, flow("bench.noop", { do: () => void done++ }));
  const store = createMemoryStore();
  const app = createApp({ modules: [{ w }], env: "test", store, logger, config: { signals: { concurrency } } });
  await store.open();
  const now = Date.now();
  for (let i = 0; i < count; i += 10_000) {
    const batch = [];
    for (let j = i; j < Math.min(count, i + 10_000); j++) {
      batch.push({ id: newId(now), signal: "bench.noop", key: keys > 0 ? `k${j % keys}` : null, payload: { j }, parentRunId: null });
    }
    await store.enqueue(batch, now);
  }
  const t0 = performance.now();
  await app.boot();
  await app.idle({ timeoutMs: 600_000 });
  const ms = performance.now() - t0;
  await app.stop();
  if (done !== count) throw new Error(`${label}: ${done} of ${count} handled`);
  const rate = Math.round(count / (ms / 1000));
  console.log(`${label.padEnd(44)} ${rate.toLocaleString("en").padStart(10)} msg/s  (${ms.toFixed(0)} ms)`);
  return rate;
}

const unkeyed = await drain(`${count} unkeyed, concurrency 256`, 0, 256);
const keyed = await drain(`${count / 20} keys x 20, concurrency 256`, count / 20, 256);
console.log(`keyed / unkeyed = ${(keyed / unkeyed).toFixed(2)}`);
