// A fleet of child processes on one PostgreSQL schema: migrates it, adds the test's tables, spawns, tears down.
import pg from "pg";
import { afterAll, beforeAll } from "vitest";
import { newId } from "../../src/id.ts";
import { createPostgresStore } from "../../src/store/postgres/postgres-store.ts";
import { TEST_DATABASE_URL } from "../conformance/drivers.ts";
import { Child } from "./spawn.ts";

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
}

/** Registers beforeAll/afterAll for a fleet on `schema` and returns it. */
export function useFleet(o: FleetOptions): Fleet {
  const url = (): string => (typeof o.url === "function" ? o.url() : (o.url ?? TEST_DATABASE_URL));
  const drop = o.dropSchema ?? true;
  let pool: pg.Pool | undefined;
  const children: Child[] = [];
  const q = `"${o.schema}"`;

  beforeAll(async () => {
    pool = new pg.Pool({ connectionString: url(), max: 2 });
    pool.on("error", () => undefined); // an idle connection cut by a restart of a private cluster
    if (drop) await pool.query(`DROP SCHEMA IF EXISTS ${q} CASCADE`);
    const store = createPostgresStore({ connectionString: url(), schema: o.schema });
    await store.open();
    await store.close();
    for (const t of o.tables ?? []) await pool.query(t.replaceAll("$S", q));
  }, 60_000);

  afterAll(async () => {
    for (const c of children) if (c.proc.exitCode === null) await c.kill();
    if (drop) await pool?.query(`DROP SCHEMA IF EXISTS ${q} CASCADE`);
    await pool?.end();
  });

  return {
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
