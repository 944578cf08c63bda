/**
 * Drains no-op messages through the memory engine's claim/settle, in one
 * process, and prints messages per second.
 *
 *   node --import tsx bench/memory-drain.ts
 *
 * Scenarios: 200 000 unkeyed messages; 10 000 keys x 20 messages (per-key
 * FIFO, emitted round-robin across keys); the unkeyed case again through the
 * async Store wrapper. Batches of 256. Each scenario runs 5 times on a fresh
 * engine; the median is reported (the first run warms the JIT).
 */
import { MemoryEngine } from "../src/store/memory/memory-engine.ts";
import { createMemoryStore } from "../src/store/memory/memory-store.ts";
import type { NewMessage, Settlement } from "../src/store/types.ts";

const BATCH = 256;
const NOW = 1_700_000_000_000;
const LEASE = 30_000;
const RUNS = 5;

function unkeyed(n: number): NewMessage[] {
  return Array.from({ length: n }, (_, i) => ({
    id: `m${i}`,
    signal: "bench",
    key: null,
    payload: { n: i },
    parentRunId: null,
  }));
}

function keyed(keys: number, perKey: number): NewMessage[] {
  const out: NewMessage[] = [];
  for (let j = 0; j < perKey; j++) {
    for (let k = 0; k < keys; k++)
      out.push({ id: `k${k}-${j}`, signal: "bench", key: `k${k}`, payload: { n: j }, parentRunId: null });
  }
  return out;
}

interface Result {
  enqueueMs: number;
  drainMs: number;
}

function engineRun(messages: readonly NewMessage[]): Result {
  const engine = new MemoryEngine();
  const t0 = performance.now();
  for (let i = 0; i < messages.length; i += 1_000) engine.enqueue(messages.slice(i, i + 1_000), NOW);
  const t1 = performance.now();
  let done = 0;
  for (;;) {
    const got = engine.claim({ signal: "bench", worker: "w", max: BATCH, now: NOW, leaseMs: LEASE });
    if (got.length === 0) break;
    const settlements: Settlement[] = new Array<Settlement>(got.length);
    for (let i = 0; i < got.length; i++) {
      const c = got[i]!;
      settlements[i] = { id: c.id, worker: c.lockedBy, attempt: c.attempts, status: "delivered" };
    }
    done += engine.settle(settlements, NOW).applied.length;
  }
  const t2 = performance.now();
  const stats = engine.stats("bench", NOW);
  if (done !== messages.length || stats.delivered !== messages.length || stats.pending !== 0) {
    throw new Error(`bench: drained ${done}/${messages.length} (stats ${JSON.stringify(stats)})`);
  }
  return { enqueueMs: t1 - t0, drainMs: t2 - t1 };
}

async function storeRun(messages: readonly NewMessage[]): Promise<Result> {
  const store = createMemoryStore();
  const t0 = performance.now();
  for (let i = 0; i < messages.length; i += 1_000) await store.enqueue(messages.slice(i, i + 1_000), NOW);
  const t1 = performance.now();
  let done = 0;
  for (;;) {
    const got = await store.claim({ signal: "bench", worker: "w", max: BATCH, now: NOW, leaseMs: LEASE });
    if (got.length === 0) break;
    const res = await store.settle(
      got.map((c) => ({ id: c.id, worker: c.lockedBy, attempt: c.attempts, status: "delivered" as const })),
      NOW,
    );
    done += res.applied.length;
  }
  const t2 = performance.now();
  if (done !== messages.length) throw new Error(`bench: drained ${done}/${messages.length}`);
  return { enqueueMs: t1 - t0, drainMs: t2 - t1 };
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function scenario(
  name: string,
  messages: readonly NewMessage[],
  once: (m: readonly NewMessage[]) => Result | Promise<Result>,
) {
  const results: Result[] = [];
  for (let i = 0; i < RUNS; i++) results.push(await once(messages));
  const drainMs = median(results.map((r) => r.drainMs));
  const enqueueMs = median(results.map((r) => r.enqueueMs));
  const rate = messages.length / (drainMs / 1_000);
  const endToEnd = messages.length / ((drainMs + enqueueMs) / 1_000);
  console.log(
    `${name.padEnd(34)} drain ${Math.round(rate).toLocaleString("en-US").padStart(10)} msg/s ` +
      `(${drainMs.toFixed(0)} ms)  enqueue ${enqueueMs.toFixed(0)} ms  enqueue+drain ${Math.round(endToEnd).toLocaleString("en-US")} msg/s`,
  );
  return rate;
}

const flat = unkeyed(200_000);
const fifo = keyed(10_000, 20);
console.log(`node ${process.version}, batch ${BATCH}, median of ${RUNS} runs`);
const u = await scenario("engine, 200k unkeyed", flat, engineRun);
const k = await scenario("engine, 10k keys x 20 (FIFO)", fifo, engineRun);
await scenario("async store, 200k unkeyed", flat, storeRun);
console.log(
  `keyed / unkeyed drain rate: ${(k / u).toFixed(2)} (target >= 0.5); unkeyed target >= 200,000 msg/s`,
);
