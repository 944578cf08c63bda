/**
 * What every adapter needs from the machine: the bench database (created on
 * demand, one schema per scenario run), peers loaded from bench/node_modules,
 * statistics, and the machine description for the report.
 */
import { cpus, loadavg, release, totalmem } from "node:os";
import pg from "pg";
import { benchRun, leftoverNames, runPidOf } from "./run-id.ts";

/** The bench's own database, so its schemas never mix with the test suite's. */
export const DATABASE_URL =
  process.env.BENCH_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/okengine_bench";
export const REDIS = {
  host: process.env.BENCH_REDIS_HOST ?? "127.0.0.1",
  port: Number(process.env.BENCH_REDIS_PORT ?? 6379),
};

export { randomName } from "./run-id.ts";

/** Runs `fn` with one short-lived client on `url`. */
export async function withClient<T>(fn: (c: pg.Client) => Promise<T>, url = DATABASE_URL): Promise<T> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

/** Creates the bench database if it does not exist yet. */
export async function ensureDatabase(): Promise<void> {
  const u = new URL(DATABASE_URL);
  const db = decodeURIComponent(u.pathname.slice(1));
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(db)) throw new Error(`bench: unexpected database name "${db}"`);
  const admin = new URL(DATABASE_URL);
  admin.pathname = "/postgres";
  await withClient(async (c) => {
    const { rowCount } = await c.query("SELECT 1 FROM pg_database WHERE datname = $1", [db]);
    if (rowCount === 0) await c.query(`CREATE DATABASE "${db}"`);
  }, admin.toString());
}

export async function dropSchema(schema: string): Promise<void> {
  if (!/^[a-z_][a-z0-9_]*$/.test(schema)) throw new Error(`bench: bad schema name ${schema}`);
  await withClient((c) => c.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`));
}

/**
 * Drops the schemas under `prefixes` that earlier runs left behind (a run killed mid-measurement),
 * sparing those of runs still going (run-id.ts): the number dropped.
 */
export async function dropLeftoverSchemas(prefixes: readonly string[]): Promise<number> {
  return dropSchemas(prefixes, (names) => leftoverNames(names, prefixes));
}

/** Drops this run's own schemas under `prefixes` (on SIGINT or SIGTERM, before the measurement's own cleanup could run). */
export async function dropRunSchemas(prefixes: readonly string[]): Promise<number> {
  const own = Number(benchRun().slice(1));
  return dropSchemas(prefixes, (names) => names.filter((n) => runPidOf(n, prefixes) === own));
}

async function dropSchemas(
  prefixes: readonly string[],
  pick: (names: string[]) => string[],
): Promise<number> {
  return withClient(async (c) => {
    const { rows } = await c.query<{ nspname: string }>(
      "SELECT nspname FROM pg_namespace WHERE nspname LIKE ANY($1::text[])",
      [prefixes.map((p) => `${p}\\_%`)],
    );
    const names = pick(rows.map((r) => r.nspname));
    for (const name of names) await c.query(`DROP SCHEMA IF EXISTS "${name}" CASCADE`);
    return names.length;
  });
}

/**
 * Loads a peer package from bench/node_modules. The specifier is a variable on
 * purpose: the root typecheck must pass without bench/node_modules, so each
 * adapter declares the few peer types it uses.
 */
export async function peer<T>(name: string): Promise<T> {
  const specifier: string = name;
  return (await import(specifier)) as T;
}

export const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  const m = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

/** Nearest-rank percentile of an ascending array. */
export const percentile = (sorted: readonly number[], p: number): number =>
  sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? NaN;

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Resolves when `check` holds, polling every `everyMs`; false on timeout. */
export async function until(
  check: () => boolean | Promise<boolean>,
  timeoutMs: number,
  everyMs = 20,
): Promise<boolean> {
  const end = performance.now() + timeoutMs;
  for (;;) {
    if (await check()) return true;
    if (performance.now() > end) return false;
    await sleep(everyMs);
  }
}

export interface Signalled<T> {
  promise: Promise<T>;
  resolve: (v: T) => void;
}

/** A promise with its resolver, for "the N-th handler ran". */
export function signalled<T = void>(): Signalled<T> {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

export interface Machine {
  cpus: number;
  cpuModel: string;
  memGiB: number;
  node: string;
  os: string;
  postgres: string;
  postgresSettings: Record<string, string>;
  redis: string;
  redisPersistence: string;
  /** 1 / 5 / 15 min load averages when the run started (other work on the machine shows here). */
  loadAtStart: number[];
}

interface RedisLike {
  info(section: string): Promise<string>;
  config(op: "GET", key: string): Promise<string[]>;
  quit(): Promise<unknown>;
}

export async function describeMachine(): Promise<Machine> {
  const settings = [
    "synchronous_commit",
    "fsync",
    "wal_level",
    "shared_buffers",
    "max_connections",
    "commit_delay",
  ];
  const { version, values } = await withClient(async (c) => {
    const v = await c.query<{ v: string }>("SELECT current_setting('server_version') AS v");
    const s = await c.query<{ name: string; setting: string; unit: string | null }>(
      "SELECT name, setting, unit FROM pg_settings WHERE name = ANY($1::text[])",
      [settings],
    );
    return {
      version: v.rows[0]!.v,
      values: Object.fromEntries(
        s.rows.map((r) => [r.name, r.unit ? `${r.setting} (${r.unit})` : r.setting]),
      ),
    };
  });
  let redis = "unreachable";
  let redisPersistence = "unknown";
  try {
    const { Redis } = await peer<{ Redis: new (o: object) => RedisLike }>("ioredis");
    const r = new Redis({ ...REDIS, lazyConnect: false, maxRetriesPerRequest: 1 });
    try {
      redis = /redis_version:(\S+)/.exec(await r.info("server"))?.[1] ?? "?";
      const aof = (await r.config("GET", "appendonly"))[1];
      const fsync = (await r.config("GET", "appendfsync"))[1];
      const save = (await r.config("GET", "save"))[1];
      redisPersistence = `appendonly ${aof}${aof === "yes" ? ` (appendfsync ${fsync})` : ""}, save "${save}"`;
    } finally {
      await r.quit();
    }
  } catch {
    // Reported as unreachable; BullMQ then fails its scenarios with that reason.
  }
  return {
    cpus: cpus().length,
    cpuModel: cpus()[0]?.model.trim() ?? "?",
    memGiB: Math.round(totalmem() / 2 ** 30),
    node: process.version,
    os: `${process.platform} ${release()}`,
    postgres: version,
    postgresSettings: values,
    redis,
    redisPersistence,
    loadAtStart: loadavg().map((l) => +l.toFixed(2)),
  };
}
