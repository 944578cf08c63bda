/**
 * The file driver under load, in one process, on the directory's real disk:
 *
 *   node --import tsx bench/file-drain.ts [dir]      (default: a temp dir under os.tmpdir())
 *
 * 1. Drain: 20 000 no-op messages enqueued in batches of 100, then drained at
 *    concurrency 32 the way a worker pool runs — one claim loop taking up to
 *    the free slots, handlers that finish on a microtask, and a settle loop
 *    flushing every finished outcome in one call while the next claim is in
 *    flight. Unkeyed, and keyed over 200 keys. Every claim and settle is a
 *    SQLite transaction step; the calls of one event-loop turn share one
 *    commit (one WAL fsync), so the figure is bounded by fsync latency and by
 *    how many calls a turn folds into one commit.
 * 2. Group commit: 20 000 single-message enqueues from 1, 16 and 256
 *    concurrent producers, each awaiting its commit before the next.
 * 3. Open: open() of a directory holding those 20 000 messages after a
 *    clean close.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createFileStore, type FileStore } from "../src/store/file/file-store.ts";
import type { NewMessage } from "../src/store/types.ts";
import { drain } from "./store-drain.ts";

const NOW = 1_700_000_000_000;
const CONCURRENCY = 32;
const N = 20_000;
const root = process.argv[2] ?? tmpdir();

const rate = (count: number, ms: number): string =>
  `${Math.round((count / ms) * 1000).toLocaleString("en")}/s`;

function messages(n: number, keys: number, prefix = "m"): NewMessage[] {
  return Array.from({ length: n }, (_, i) => ({
    id: `${prefix}${i}`,
    signal: "bench",
    key: keys === 0 ? null : `k${i % keys}`,
    payload: { n: i },
    parentRunId: null,
  }));
}

async function withStore<T>(fn: (store: FileStore, dir: string) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(join(root, "oke-file-bench-"));
  const store = createFileStore({ dir });
  await store.open();
  try {
    return await fn(store, dir);
  } finally {
    await store.close();
    await rm(dir, { recursive: true, force: true });
  }
}

async function drainScenario(label: string, keys: number): Promise<void> {
  await withStore(async (store) => {
    const all = messages(N, keys);
    const f0 = store.diagnostics().commits;
    const t0 = performance.now();
    for (let i = 0; i < N; i += 100) await store.enqueue(all.slice(i, i + 100), NOW);
    const t1 = performance.now();
    const f1 = store.diagnostics().commits;
    const { claims, settles } = await drain(store, N, CONCURRENCY, NOW);
    const t2 = performance.now();
    const d = store.diagnostics();
    const stats = await store.stats("bench", NOW);
    if (stats.delivered !== N || stats.pending !== 0 || stats.inflight !== 0)
      throw new Error(`bench: ${JSON.stringify(stats)}`);
    console.log(
      `${label.padEnd(30)} enqueue ${rate(N, t1 - t0).padStart(9)} (${f1 - f0} commits)  drain ${rate(N, t2 - t1).padStart(8)}` +
        `  (${(t2 - t1).toFixed(0)} ms, ${claims} claims, ${settles} settles, ${d.commits - f1} commits)`,
    );
  });
}

async function groupCommitScenario(producers: number, total: number): Promise<void> {
  await withStore(async (store) => {
    const f0 = store.diagnostics().commits;
    let next = 0;
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: producers }, async () => {
        for (let i = next++; i < total; i = next++) {
          await store.enqueue(
            [{ id: `g${i}`, signal: "bench", key: null, payload: { i }, parentRunId: null }],
            NOW,
          );
        }
      }),
    );
    const ms = performance.now() - t0;
    const fsyncs = store.diagnostics().commits - f0;
    console.log(
      `group commit, ${String(producers).padStart(3)} producers   ${rate(total, ms).padStart(9)}  ` +
        `${fsyncs} commits for ${total} enqueues (${(total / fsyncs).toFixed(1)} per commit, ${((ms * 1000) / fsyncs).toFixed(0)} µs per commit)`,
    );
  });
}

async function recoveryScenario(): Promise<void> {
  const dir = await mkdtemp(join(root, "oke-file-bench-"));
  try {
    const writer = createFileStore({ dir });
    await writer.open();
    const all = messages(N, 0);
    for (let i = 0; i < N; i += 100) await writer.enqueue(all.slice(i, i + 100), NOW);
    await writer.close();
    const t0 = performance.now();
    const reader = createFileStore({ dir });
    await reader.open();
    const ms = performance.now() - t0;
    const pending = (await reader.stats("bench", NOW)).pending;
    await reader.close();
    console.log(`open() with ${N} messages after a clean close   ${ms.toFixed(0)} ms (${pending} pending)`);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

console.log(`file-drain: node ${process.version}, dir ${root}, concurrency ${CONCURRENCY}`);
await drainScenario("unkeyed 20 000", 0);
await drainScenario("keyed 20 000 over 200 keys", 200);
await groupCommitScenario(1, 2_000);
await groupCommitScenario(16, N);
await groupCommitScenario(256, N);
await recoveryScenario();
