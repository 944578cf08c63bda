/** Test helpers for postgres: a fresh schema per case, from DATABASE_URL_TEST only. */
import { randomBytes } from "node:crypto";
import pg from "pg";
import { createPostgresStore, type PostgresStoreOptions } from "./postgres-store.ts";
import type { Store } from "../types.ts";

/** Test database; each test file (or case) works in a schema of its own. */
export const PG_URL = process.env.DATABASE_URL_TEST ?? "postgres://postgres@127.0.0.1:5432/test";

/** A schema name no other file or run uses. */
export const freshSchema = (tag: string): string => `oke_t_${tag}_${randomBytes(4).toString("hex")}`;

export async function dropSchema(schema: string, url = PG_URL): Promise<void> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    await c.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  } finally {
    await c.end();
  }
}

/** An opened store on `schema`; small pool, fast poll off by default. */
export async function openStore(schema: string, extra: Partial<PostgresStoreOptions> = {}): Promise<Store> {
  const store = createPostgresStore({ connectionString: PG_URL, schema, poolSize: 4, ...extra });
  await store.open();
  return store;
}
