/**
 * S13 probe of an embedded database as the file driver's engine: better-sqlite3 (12.x; 13 needs
 * Node 22) with the runs and journal tables the PostgreSQL driver has and a partial index on due
 * sleepers. Not a driver: it times the store's side of S13 alone, synchronously —
 *  - seed N parked runs (a step entry, a sleep entry), `due` of them overdue, in one transaction;
 *  - boot: open the database in a fresh process (WAL), the orphan-scan page and the next wake time;
 *    heap and RSS after it;
 *  - resume: claim due runs 32 at a time (UPDATE … RETURNING through the index), read their
 *    journals, append one entry and finish each, one fsync'd commit per batch (synchronous=FULL).
 *
 *   npm install --prefix bench --no-save better-sqlite3@12.11.1   (it compiles; allow its install script)
 *   node --expose-gc --import tsx bench/sqlite-sleepers.ts [--runs 1000000] [--due 100000] [--batch 32]
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

interface Statement {
  run(...params: unknown[]): { changes: number };
  get(...params: unknown[]): unknown;
  all(...params: unknown[]): unknown[];
}
interface Database {
  pragma(source: string): unknown;
  exec(source: string): void;
  prepare(source: string): Statement;
  transaction<A extends unknown[]>(fn: (...args: A) => void): (...args: A) => void;
  close(): void;
}
type DatabaseCtor = new (file: string) => Database;

const arg = (name: string, def: string): string => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1]! : def;
};
const RUNS = Number(arg("runs", "1000000"));
const DUE = Math.min(RUNS, Number(arg("due", "100000")));
const BATCH = Number(arg("batch", "32"));
const DAY = 86_400_000;
const benchDir = fileURLToPath(new URL(".", import.meta.url));
const Sqlite = createRequire(join(benchDir, "package.json"))("better-sqlite3") as DatabaseCtor;

const SCHEMA = `
CREATE TABLE runs (
  id TEXT PRIMARY KEY, flow TEXT NOT NULL, status TEXT NOT NULL, input TEXT, output TEXT, error TEXT,
  parent_run_id TEXT, lease_owner TEXT, lease_expires_at INTEGER, wake_at INTEGER,
  created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX runs_wake ON runs (wake_at, id) WHERE status = 'sleeping';
CREATE INDEX runs_lease ON runs (lease_expires_at, id) WHERE status IN ('running', 'compensating');
CREATE TABLE journal_entries (
  run_id TEXT NOT NULL, seq INTEGER NOT NULL, kind TEXT NOT NULL, name TEXT NOT NULL, value TEXT,
  error TEXT, duration TEXT, wake_at INTEGER, at INTEGER NOT NULL, PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;`;

const open = (file: string): Database => {
  const db = new Sqlite(file);
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = FULL");
  return db;
};
const runId = (i: number): string => `s13-${String(i).padStart(8, "0")}`;

function seed(file: string): number {
  const t0 = performance.now();
  const db = open(file);
  db.exec(SCHEMA);
  const now = Date.now();
  const run = db.prepare(
    `INSERT INTO runs VALUES (?, 'bench.s13', 'sleeping', ?, NULL, NULL, NULL, NULL, NULL, ?, ?, ?)`,
  );
  const entry = db.prepare(`INSERT INTO journal_entries VALUES (?, ?, ?, ?, ?, NULL, ?, ?, ?)`);
  db.transaction(() => {
    for (let i = 0; i < RUNS; i++) {
      const id = runId(i);
      const wakeAt = i < DUE ? now - 60_000 : now + 30 * DAY;
      run.run(id, JSON.stringify({ i }), wakeAt, now, now);
      entry.run(id, 0, "step", "before", JSON.stringify(i), null, null, now);
      entry.run(id, 1, "sleep", "long", null, "30d", wakeAt, now);
    }
  })();
  db.pragma("wal_checkpoint(TRUNCATE)");
  db.close();
  return performance.now() - t0;
}

function measure(file: string, seedMs: number): void {
  global.gc?.();
  const heap0 = process.memoryUsage().heapUsed;
  const rss0 = process.memoryUsage().rss;
  const t0 = performance.now();
  const db = open(file);
  const now = Date.now();
  // Boot: the orphan scan's first page (running without a live lease, then sleepers) and the wake timer.
  db.prepare(
    `SELECT * FROM runs WHERE status IN ('running', 'compensating') AND (lease_expires_at IS NULL OR lease_expires_at <= ?) LIMIT 100`,
  ).all(now);
  db.prepare(`SELECT * FROM runs WHERE status = 'sleeping' LIMIT 100`).all();
  db.prepare(`SELECT min(wake_at) AS w FROM runs WHERE status = 'sleeping'`).get();
  const bootMs = performance.now() - t0;
  global.gc?.();
  const heap = process.memoryUsage().heapUsed - heap0;
  const rss = process.memoryUsage().rss - rss0;

  const claim = db.prepare(
    `UPDATE runs SET status = 'running', wake_at = NULL, lease_owner = ?, lease_expires_at = ?, updated_at = ?
     WHERE id IN (SELECT id FROM runs WHERE status = 'sleeping' AND wake_at <= ? ORDER BY wake_at, id LIMIT ?)
     RETURNING *`,
  );
  const journal = db.prepare(`SELECT * FROM journal_entries WHERE run_id = ? ORDER BY seq`);
  const append = db.prepare(
    `INSERT INTO journal_entries VALUES (?, 2, 'step', 'after', '1', NULL, NULL, NULL, ?)`,
  );
  const finish = db.prepare(
    `UPDATE runs SET status = 'completed', output = NULL, lease_owner = NULL, lease_expires_at = NULL, updated_at = ?
     WHERE id = ? AND lease_owner = ?`,
  );
  let resumed = 0;
  const batch = db.transaction((at: number) => {
    const rows = claim.all("me", at + 30_000, at, at, BATCH) as Array<{ id: string }>;
    for (const r of rows) {
      journal.all(r.id);
      append.run(r.id, at);
      if (finish.run(at, r.id, "me").changes !== 1) throw new Error(`finish ${r.id}`);
    }
    resumed += rows.length;
  });
  const r0 = performance.now();
  for (let before = -1; resumed < DUE && resumed !== before;) {
    before = resumed;
    batch(Date.now());
  }
  const resumeMs = performance.now() - r0;
  db.close();
  const n = (x: number): string => Math.round(x).toLocaleString("en");
  console.log(
    `S13 sqlite   ${n(RUNS)} parked: seed ${n(seedMs)} ms, database ${n(statSync(file).size / RUNS)} B/run on disk, ` +
      `boot (open + orphan page + next wake) ${n(bootMs)} ms, heap ${n(heap / RUNS)} B/run, rss ${n(rss / RUNS)} B/run; ` +
      `${n(resumed)} due claimed + journal read + append + finish at ${n(resumed / (resumeMs / 1000))} runs/s ` +
      `(batches of ${BATCH}, one fsync'd commit each; store side only, no flow code)`,
  );
}

if (arg("phase", "all") === "measure") {
  measure(arg("file", ""), Number(arg("seed-ms", "0")));
} else {
  const dir = mkdtempSync(join(tmpdir(), "oke-s13-sqlite-"));
  try {
    const file = join(dir, "store.db");
    const seedMs = seed(file);
    const r = spawnSync(
      process.execPath,
      [
        "--expose-gc",
        "--import",
        "tsx",
        fileURLToPath(import.meta.url),
        ...process.argv.slice(2),
        "--phase",
        "measure",
        "--file",
        file,
        "--seed-ms",
        String(seedMs),
      ],
      { stdio: "inherit" },
    );
    if (r.status !== 0) throw new Error(`measuring process exited ${r.status ?? r.signal}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
