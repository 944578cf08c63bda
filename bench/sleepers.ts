/**
 * S13 sleepers at scale: N parked durable runs (a step, then a sleep) on one driver, of which
 * `due` are already due. Measures, in a fresh process over the seeded store:
 *  - memory: heapUsed and RSS after boot minus before the store opened (after gc), per parked run;
 *  - boot to ready: createApp + boot() (store open/recovery, orphan scan, wake timer) until ready;
 *  - resume rate: the `due` runs woken, replayed and finished under durable.concurrency, per second.
 *
 *   node --expose-gc --import tsx bench/sleepers.ts [--driver memory|file|postgres] [--runs 1000000]
 *        [--due 100000] [--concurrency 32] [--json]
 *
 * Seeding writes the runs through the engine (memory), prepared INSERTs in one SQLite transaction
 * (file: straight into .oke/store.db, the rows its engine writes) or one INSERT … SELECT
 * generate_series (postgres), not through N flow invocations, so 1 000 000 runs take seconds; the
 * rows are what the flow below would have written. Prints one line (or JSON with --json).
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { benchLogger } from "./compare/logger.ts";
import { createApp, flow } from "../src/index.ts";
import { createFileStore } from "../src/store/file/file-store.ts";
import { DB_FILE, openDb } from "../src/store/file/sqlite/sqlite-db.ts";
import { MemoryEngine } from "../src/store/memory/index.ts";
import { createMemoryStore } from "../src/store/memory/memory-store.ts";
import { createPostgresStore } from "../src/store/postgres/postgres-store.ts";
import type { Store } from "../src/store/types.ts";
import { randomName } from "./compare/run-id.ts";

const arg = (name: string, def: string): string => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1]! : def;
};
const DRIVER = arg("driver", "file");
const RUNS = Number(arg("runs", "1000000"));
const DUE = Math.min(RUNS, Number(arg("due", "100000")));
const CONCURRENCY = Number(arg("concurrency", "32"));
const JSON_OUT = process.argv.includes("--json");
const URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const FLOW = "bench.s13";
const DAY = 86_400_000;
const logger = benchLogger();

export interface SleepersFigures {
  driver: string;
  runs: number;
  due: number;
  concurrency: number;
  seedMs: number;
  bootMs: number;
  heapBytesPerRun: number;
  rssBytesPerRun: number;
  resumeMs: number;
  resumePerSecond: number;
  /** postgres: runs + journal_entries, tables and indexes; file: store.db. */
  tableBytes?: number;
}

const runId = (i: number): string => `s13-${String(i).padStart(8, "0")}`;

/** Wake time of run i: the first `due` are a minute overdue, the rest sleep 30 days. */
const wakeOf = (i: number, now: number): number => (i < DUE ? now - 60_000 : now + 30 * DAY);

function seedEngine(now: number): MemoryEngine {
  const e = new MemoryEngine();
  for (let i = 0; i < RUNS; i++) {
    const id = runId(i);
    e.startRun({ id, flow: FLOW, input: { i }, parentRunId: null, owner: "seed", now, leaseMs: 30_000 });
    e.append({
      runId: id,
      owner: "seed",
      now,
      entries: [{ runId: id, seq: 0, kind: "step", name: "before", value: i, at: now }],
    });
    const wakeAt = wakeOf(i, now);
    e.park({
      runId: id,
      owner: "seed",
      now,
      entry: { runId: id, seq: 1, kind: "sleep", label: "long", duration: "30d", wakeAt, at: now },
    });
  }
  return e;
}

/** The file driver's rows for the same runs, written into a fresh store.db in one transaction. */
function seedFile(dir: string, now: number): number {
  const db = openDb(join(dir, DB_FILE));
  try {
    const run = db.prepare(
      `INSERT INTO runs (id, flow, status, input, output, error, parent_run_id, lease_owner, lease_expires_at,
         wake_at, deadline, status_seq, created_at, updated_at)
       VALUES (?, ?, 'sleeping', ?, NULL, NULL, NULL, NULL, NULL, ?, ?, ?, ?, ?)`,
    );
    const entry = db.prepare(
      `INSERT INTO journal_entries (run_id, seq, kind, name, value, error, duration, wake_at, at)
       VALUES (?, ?, ?, ?, ?, NULL, ?, ?, ?)`,
    );
    db.transaction(() => {
      for (let i = 0; i < RUNS; i++) {
        const id = runId(i);
        const wakeAt = wakeOf(i, now);
        run.run(id, FLOW, JSON.stringify({ i }), wakeAt, wakeAt, i + 1, now, now);
        entry.run(id, 0, "step", "before", JSON.stringify(i), null, null, now);
        entry.run(id, 1, "sleep", "long", null, "30d", wakeAt, now);
      }
    })();
    db.pragma("wal_checkpoint(TRUNCATE)");
  } finally {
    db.close();
  }
  return statSync(join(dir, DB_FILE)).size;
}

async function seedPostgres(schema: string, now: number): Promise<number> {
  const store = createPostgresStore({ connectionString: URL, schema });
  await store.open();
  await store.close();
  const c = new pg.Client({ connectionString: URL });
  await c.connect();
  try {
    const s = `"${schema}"`;
    await c.query(
      `INSERT INTO ${s}.runs (id, flow, status, input, parent_run_id, lease_owner, lease_expires_at, wake_at, created_at, updated_at)
       SELECT 's13-' || lpad(i::text, 8, '0'), $1, 'sleeping', jsonb_build_object('i', i), NULL, NULL, NULL,
              CASE WHEN i < $3 THEN $2::bigint - 60000 ELSE $2::bigint + $5::bigint END, $2, $2
       FROM generate_series(0, $4 - 1) i`,
      [FLOW, now, DUE, RUNS, 30 * DAY],
    );
    await c.query(
      `INSERT INTO ${s}.journal_entries (run_id, seq, kind, name, value, error, duration, wake_at, at)
       SELECT 's13-' || lpad(i::text, 8, '0'), 0, 'step', 'before', to_jsonb(i), NULL, NULL, NULL, $1
       FROM generate_series(0, $2 - 1) i`,
      [now, RUNS],
    );
    await c.query(
      `INSERT INTO ${s}.journal_entries (run_id, seq, kind, name, value, error, duration, wake_at, at)
       SELECT 's13-' || lpad(i::text, 8, '0'), 1, 'sleep', 'long', NULL, NULL, '30d',
              CASE WHEN i < $2 THEN $1::bigint - 60000 ELSE $1::bigint + $4::bigint END, $1
       FROM generate_series(0, $3 - 1) i`,
      [now, DUE, RUNS, 30 * DAY],
    );
    await c.query(`VACUUM ANALYZE ${s}.runs`);
    await c.query(`VACUUM ANALYZE ${s}.journal_entries`);
    const { rows } = await c.query<{ b: string }>(
      `SELECT pg_total_relation_size('${s}.runs') + pg_total_relation_size('${s}.journal_entries') AS b`,
    );
    return Number(rows[0]!.b);
  } finally {
    await c.end();
  }
}

async function dropSchema(schema: string): Promise<void> {
  const c = new pg.Client({ connectionString: URL });
  await c.connect();
  await c.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).finally(() => c.end());
}

const gc = (): void => {
  global.gc?.();
  global.gc?.();
};

/** Boots an app over `store`, waits for the due runs to finish, returns the figures. */
async function measure(makeStore: () => Store, seedMs: number, extra: Partial<SleepersFigures> = {}) {
  let resumed = 0;
  let allDone: () => void = () => undefined;
  const done = new Promise<void>((r) => (allDone = r));
  let resumeStart = 0;
  const sleeper = flow(FLOW, {
    durable: true,
    do: async (_: { i: number }, fx) => {
      await fx.step("before", () => 0);
      await fx.clock.sleep("long", "30d");
      await fx.step("after", () => 1);
      if (resumeStart === 0) resumeStart = performance.now();
      if (++resumed === DUE) allDone();
    },
  });
  gc();
  const heap0 = process.memoryUsage().heapUsed;
  const rss0 = process.memoryUsage().rss;
  const t0 = performance.now();
  const store = makeStore();
  const app = createApp({
    modules: [{ sleeper }],
    env: "prod",
    store,
    logger,
    config: { console: { port: false }, database: { url: URL }, durable: { concurrency: CONCURRENCY } },
  });
  await app.boot();
  const bootMs = performance.now() - t0;
  const bootedAt = performance.now();
  if (DUE > 0) await done;
  const resumeMs = performance.now() - bootedAt;
  gc();
  const heapBytes = process.memoryUsage().heapUsed - heap0;
  const rssBytes = process.memoryUsage().rss - rss0;
  await app.stop();
  // The caller's store outlives the app: close it (postgres keeps a LISTEN connection open otherwise).
  await store.close();
  const figures: SleepersFigures = {
    driver: DRIVER,
    runs: RUNS,
    due: DUE,
    concurrency: CONCURRENCY,
    seedMs,
    bootMs,
    // Measured after the due runs finished: the parked runs are the other RUNS - DUE plus DUE finished ones.
    heapBytesPerRun: heapBytes / RUNS,
    rssBytesPerRun: rssBytes / RUNS,
    resumeMs,
    resumePerSecond: DUE === 0 ? 0 : DUE / (resumeMs / 1000),
    ...extra,
  };
  return figures;
}

function print(f: SleepersFigures): void {
  if (JSON_OUT) {
    console.log(JSON.stringify(f));
    return;
  }
  const n = (x: number): string => Math.round(x).toLocaleString("en");
  console.log(
    `S13 ${f.driver.padEnd(8)} ${n(f.runs)} parked: seed ${n(f.seedMs)} ms, boot to ready ${n(f.bootMs)} ms, ` +
      `heap ${n(f.heapBytesPerRun)} B/run, rss ${n(f.rssBytesPerRun)} B/run` +
      (f.tableBytes === undefined ? "" : `, tables ${n(f.tableBytes / f.runs)} B/run on disk`) +
      `; ${n(f.due)} due resumed at ${n(f.resumePerSecond)} runs/s (concurrency ${f.concurrency})`,
  );
}

const phase = arg("phase", "all");
if (DRIVER === "memory") {
  const now = Date.now();
  gc();
  const heap0 = process.memoryUsage().heapUsed;
  const rss0 = process.memoryUsage().rss;
  const s0 = performance.now();
  const engine = seedEngine(now);
  const seedMs = performance.now() - s0;
  // The memory driver has no disk: its memory is the engine's, so take it before the app boots on it.
  gc();
  const heapPerRun = (process.memoryUsage().heapUsed - heap0) / RUNS;
  const rssPerRun = (process.memoryUsage().rss - rss0) / RUNS;
  const f = await measure(() => createMemoryStore(engine), seedMs);
  print({ ...f, heapBytesPerRun: heapPerRun, rssBytesPerRun: rssPerRun });
} else if (DRIVER === "file" && phase === "all") {
  // Seed here, measure in a fresh process (nothing of the seed engine left in its heap).
  const dir = mkdtempSync(join(tmpdir(), "oke-s13-"));
  try {
    const s0 = performance.now();
    const tableBytes = seedFile(dir, Date.now());
    const seedMs = performance.now() - s0;
    const self = fileURLToPath(import.meta.url);
    const r = spawnSync(
      process.execPath,
      [
        "--expose-gc",
        "--max-old-space-size=8192",
        "--import",
        "tsx",
        self,
        ...process.argv.slice(2),
        "--phase",
        "measure",
        "--dir",
        dir,
        "--seed-ms",
        String(seedMs),
        "--table-bytes",
        String(tableBytes),
      ],
      { stdio: "inherit" },
    );
    if (r.status !== 0) throw new Error(`S13 file: measuring process exited ${r.status ?? r.signal}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
} else if (DRIVER === "file") {
  const dir = arg("dir", "");
  print(
    await measure(() => createFileStore({ dir }), Number(arg("seed-ms", "0")), {
      tableBytes: Number(arg("table-bytes", "0")),
    }),
  );
} else if (DRIVER === "postgres") {
  const schema = randomName("oke_bench_s13");
  try {
    const s0 = performance.now();
    const tableBytes = await seedPostgres(schema, Date.now());
    const seedMs = performance.now() - s0;
    print(
      await measure(() => createPostgresStore({ connectionString: URL, schema, poolSize: 20 }), seedMs, {
        tableBytes,
      }),
    );
  } finally {
    await dropSchema(schema);
  }
} else {
  throw new Error(`unknown driver ${DRIVER} (memory, file, postgres)`);
}
