// A fleet of child processes on one PostgreSQL schema: migrates it, adds the test's tables, spawns, tears down.
import pg from "pg";
import { pino, type Logger } from "pino";
import { afterAll, beforeAll } from "vitest";
import { newId } from "../../src/id.ts";
import { createPostgresStore, type PostgresStoreOptions } from "../../src/store/postgres/postgres-store.ts";
import type { Store } from "../../src/store/types.ts";
import { TEST_DATABASE_URL } from "../conformance/drivers.ts";
import { Child } from "./spawn.ts";
import { startTcpProxy, viaProxy, type TcpProxy } from "./tcp-proxy.ts";

export interface FleetOptions {
  /** Schema of the test's own; dropped before and after on the shared server. */
  schema: string;
  /** The database (default DATABASE_URL_TEST); a function when it is known only later (a private cluster). */
  url?: string | (() => string);
  /** `CREATE TABLE` statements run after the migrations; `$S` stands for the quoted schema. */
  tables?: string[];
  /** The child program (default child-app.ts). */
  script?: string;
  /** Env every child gets, before the per-spawn env. */
  env?: Record<string, string>;
  /** Drop the schema before and after (default true; a private cluster is thrown away whole). */
  dropSchema?: boolean;
  /** Keep a store of the test's own open on the schema from beforeAll to afterAll (`fleet.store`). */
  store?: boolean;
}

export interface Fleet {
  readonly schema: string;
  url(): string;
  /** A query on the fleet's database (a small pool of the test's own). */
  query<R extends pg.QueryResultRow = pg.QueryResultRow>(
    text: string,
    values?: unknown[],
  ): Promise<pg.QueryResult<R>>;
  readonly children: Child[];
  /** Spawns one child with DATABASE_URL + OKE_SCHEMA and `env`; it is SIGKILLed after the file if still running. */
  spawn(env?: Record<string, string>, script?: string): Child;
  /** Enqueues straight through a store (the producers are not the processes under test). */
  enqueue(signal: string, messages: Array<{ payload: unknown; key: string | null }>): Promise<void>;
  /** The test's own store on the schema (only with `store: true`), to read what the children did. */
  readonly store: Store;
}

/** Registers beforeAll/afterAll for a fleet on `schema` and returns it. */
export function useFleet(o: FleetOptions): Fleet {
  const url = (): string => (typeof o.url === "function" ? o.url() : (o.url ?? TEST_DATABASE_URL));
  const drop = o.dropSchema ?? true;
  let pool: pg.Pool | undefined;
  let kept: Store | undefined;
  const children: Child[] = [];
  const q = `"${o.schema}"`;

  beforeAll(async () => {
    pool = new pg.Pool({ connectionString: url(), max: 2 });
    pool.on("error", () => undefined); // an idle connection cut by a restart of a private cluster
    if (drop) await pool.query(`DROP SCHEMA IF EXISTS ${q} CASCADE`);
    const store = createPostgresStore({ connectionString: url(), schema: o.schema });
    await store.open();
    if (o.store) kept = store;
    else await store.close();
    for (const t of o.tables ?? []) await pool.query(t.replaceAll("$S", q));
  }, 60_000);

  afterAll(async () => {
    for (const c of children) if (!c.dead) await c.kill();
    await kept?.close();
    if (drop) await pool?.query(`DROP SCHEMA IF EXISTS ${q} CASCADE`);
    await pool?.end();
  });

  return {
    get store(): Store {
      if (!kept) throw new Error("fleet.store: pass store: true (it opens in beforeAll)");
      return kept;
    },
    schema: o.schema,
    url,
    query: (text, values) => {
      if (!pool) throw new Error("the fleet's pool opens in beforeAll");
      return pool.query(text, values);
    },
    children,
    spawn: (env = {}, script = o.script) => {
      const c = new Child({ DATABASE_URL: url(), OKE_SCHEMA: o.schema, ...o.env, ...env }, script);
      children.push(c);
      return c;
    },
    enqueue: async (signal, messages) => {
      const store = createPostgresStore({ connectionString: url(), schema: o.schema });
      await store.open();
      try {
        for (let i = 0; i < messages.length; i += 1000) {
          await store.enqueue(
            messages.slice(i, i + 1000).map((m) => ({
              id: newId(),
              signal,
              key: m.key,
              payload: m.payload,
              parentRunId: null,
            })),
            Date.now(),
          );
        }
      } finally {
        await store.close();
      }
    },
  };
}

/** Polls (real processes: no clock to advance) every 50 ms until `check` holds. */
export async function waitUntil(
  check: () => boolean | Promise<boolean>,
  what: string,
  ms = 30_000,
): Promise<void> {
  for (const deadline = Date.now() + ms; !(await check());) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Registers an afterAll that drops `schema` on the shared server (a test whose store is its own). */
export function dropSchemaAfterAll(schema: string): void {
  afterAll(async () => {
    const c = new pg.Client({ connectionString: TEST_DATABASE_URL });
    await c.connect();
    await c.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).finally(() => c.end());
  });
}

/** A line the capturing logger kept: pino's JSON record. */
export type LogLine = { msg: string; [k: string]: unknown };

/** A pino logger at `level` (default warn) whose lines the test reads. */
export function capturingLogger(level = "warn"): {
  logger: Logger;
  lines: LogLine[];
  logged: (msg: string) => LogLine[];
} {
  const lines: LogLine[] = [];
  const logger = pino({ level }, { write: (line: string) => void lines.push(JSON.parse(line) as LogLine) });
  return { logger, lines, logged: (msg) => lines.filter((l) => l.msg === msg) };
}

/**
 * A store on `schema` of the shared server through a TCP proxy the test cuts and restores, and a
 * capturing logger. `teardown(app)` (in the test's finally) restores the proxy, stops the app, then
 * closes the store and the proxy.
 */
export async function proxiedStore(
  schema: string,
  options: Omit<PostgresStoreOptions, "connectionString" | "schema"> = {},
): Promise<
  { proxy: TcpProxy; store: Store; teardown: (app: Stoppable) => Promise<void> } & ReturnType<
    typeof capturingLogger
  >
> {
  const target = new URL(TEST_DATABASE_URL);
  const proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port || 5432) });
  const store = createPostgresStore({
    connectionString: viaProxy(TEST_DATABASE_URL, proxy),
    schema,
    ...options,
  });
  const teardown = async (app: Stoppable): Promise<void> => {
    await proxy.restore();
    await app.stop({ timeoutMs: 5_000 });
    await store.close();
    await proxy.close();
  };
  return { proxy, store, teardown, ...capturingLogger() };
}

/** An app as teardown() stops it. */
type Stoppable = { stop(o: { timeoutMs: number }): Promise<void> };
