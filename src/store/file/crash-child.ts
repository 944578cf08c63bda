// Child process the file driver's crash and lock tests kill (not library code).
/**
 * Child process for the file driver's crash and lock tests (not library code).
 *
 *   node --import tsx crash-child.ts work <dir> <tag>
 *   node --import tsx crash-child.ts hold <dir>
 *
 * Prints `ready <walBytes>` once the store is open: the size of the WAL a
 * previous (killed) process left, which this open recovered from. `work` then
 * runs writers concurrently and prints one line per acknowledged write, only
 * after its call resolved (stdout to a pipe is synchronous on Linux, so a line
 * printed is a line the parent reads even if SIGKILL follows at once):
 *   E <id>[,<id>…]         enqueued
 *   S <runId> <seq> <emit>  journal step appended together with its emit
 *   D <id>                  delivered
 * `hold` keeps the store (and its lock) open until killed.
 */
import { statSync } from "node:fs";
import { join } from "node:path";
import { createFileStore } from "./file-store.ts";
import { DB_FILE } from "./sqlite/sqlite-db.ts";

const [mode, dir, tag = "t"] = process.argv.slice(2);
if ((mode !== "work" && mode !== "hold") || dir === undefined) {
  process.stderr.write("usage: crash-child.ts work|hold <dir> [tag]\n");
  process.exit(2);
}

const out = (line: string): void => {
  process.stdout.write(`${line}\n`);
};
const store = createFileStore({ dir });

async function enqueueLoop(k: number): Promise<never> {
  for (let i = 0; ; i++) {
    const ids = Array.from({ length: 1 + (i % 3) }, (_, j) => `${tag}.e${k}.${i}.${j}`);
    await store.enqueue(
      ids.map((id, j) => ({
        id,
        signal: "crash.a",
        key: j === 1 ? `key${k}` : null,
        payload: { id, pad: "x".repeat(i % 200) },
        parentRunId: null,
      })),
      Date.now(),
    );
    out(`E ${ids.join(",")}`);
  }
}

async function journalLoop(): Promise<never> {
  const runId = `run.${tag}`;
  const owner = `child.${tag}`;
  await store.startRun({
    id: runId,
    flow: "crash.flow",
    input: { tag },
    parentRunId: null,
    owner,
    now: Date.now(),
    leaseMs: 3_600_000,
  });
  for (let seq = 0; ; seq++) {
    const now = Date.now();
    const emit = `${tag}.j${seq}`;
    await store.append({
      runId,
      owner,
      now,
      entries: [{ runId, seq, kind: "step", name: `step-${seq}`, value: { seq }, at: now }],
      emits: [{ id: emit, signal: "crash.b", key: null, payload: { seq }, parentRunId: runId }],
      leaseMs: 3_600_000,
    });
    out(`S ${runId} ${seq} ${emit}`);
  }
}

async function drainLoop(worker: string): Promise<never> {
  for (let round = 0; ; round++) {
    const now = Date.now();
    const got = await store.claim({ signal: "crash.a", worker, max: 5, now, leaseMs: 600_000 });
    if (got.length === 0) {
      await new Promise<void>((resolve) => setImmediate(resolve));
      continue;
    }
    // Every third batch fails once first, so retries and failure histories are in the log too.
    const settle = got.map((c) =>
      round % 3 === 0 && c.attempts === 1
        ? {
            id: c.id,
            worker,
            attempt: c.attempts,
            status: "pending" as const,
            failure: { code: "E", message: "retry", at: now, attempt: 1 },
          }
        : { id: c.id, worker, attempt: c.attempts, status: "delivered" as const },
    );
    const { applied } = await store.settle(settle, now);
    for (const s of settle) if (s.status === "delivered" && applied.includes(s.id)) out(`D ${s.id}`);
  }
}

async function main(): Promise<void> {
  let walBytes = 0;
  try {
    walBytes = statSync(join(store.dir, `${DB_FILE}-wal`)).size;
  } catch {
    // No WAL: the last process closed cleanly, or this is the first open.
  }
  await store.open();
  out(`ready ${walBytes}`);
  if (mode === "hold") {
    setInterval(() => undefined, 1 << 30);
    return;
  }
  await Promise.all([
    enqueueLoop(0),
    enqueueLoop(1),
    enqueueLoop(2),
    journalLoop(),
    drainLoop("w1"),
    drainLoop("w2"),
  ]);
}

main().catch((e: unknown) => {
  process.stderr.write(`crash-child failed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
  process.exit(1);
});
