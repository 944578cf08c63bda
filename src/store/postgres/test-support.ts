/** Test helpers for postgres: a fresh schema per case, from DATABASE_URL_TEST only. */
import { randomBytes } from "node:crypto";
import pg from "pg";
import { afterAll, beforeAll, expect, onTestFinished } from "vitest";
import { createPostgresStore, type PostgresStoreOptions } from "./postgres-store.ts";
import type { ClaimedMessage, NewMessage, Settlement, Store } from "../types.ts";

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

/**
 * A store on a pool of ONE connection, in a fresh schema, so a case reads the statistics, plans
 * and prepared statements of the very server session the store wrote on. Closed, and the schema
 * dropped, when the case finishes. `onNotice` hears the session's notices (auto_explain's plans).
 */
export async function storeOnOneConnection(
  tag: string,
  opts: { notify?: boolean; onNotice?: (text: string) => void } = {},
): Promise<{ store: Store; pool: pg.Pool; schema: string }> {
  const schema = freshSchema(tag);
  const pool = new pg.Pool({ connectionString: PG_URL, max: 1 });
  const { onNotice } = opts;
  if (onNotice) pool.on("connect", (c) => c.on("notice", (n) => onNotice(n.message ?? "")));
  const store = createPostgresStore({
    pool,
    connectionString: PG_URL,
    schema,
    notify: opts.notify,
    pollIntervalMs: 3_600_000,
  });
  onTestFinished(async () => {
    await store.close();
    await pool.end();
    await dropSchema(schema);
  });
  await store.open();
  return { store, pool, schema };
}

/**
 * Registers beforeAll/afterAll for `count` stores on one fresh schema (each its own pool, as that
 * many processes would have): opened before the file's cases, closed and the schema dropped after.
 * `store` is the first.
 */
export function useSchemaStores(
  tag: string,
  opts: { count?: number } & Partial<PostgresStoreOptions> = {},
): { readonly schema: string; readonly stores: Store[]; readonly store: Store } {
  const { count = 1, ...extra } = opts;
  const schema = freshSchema(tag);
  const stores: Store[] = [];
  beforeAll(async () => {
    for (let i = 0; i < count; i++) stores.push(await openStore(schema, extra));
  });
  afterAll(async () => {
    for (const s of stores) await s.close();
    await dropSchema(schema);
  });
  return {
    schema,
    stores,
    get store(): Store {
      if (!stores[0]) throw new Error("useSchemaStores: the stores open in beforeAll");
      return stores[0];
    },
  };
}

/** The time the store cases run at (fixed: a test passes `now` to every store call). */
export const T0 = 1_700_000_000_000;

/** A new message on `signal` whose payload names its id. */
export const newMessage = (id: string, key: string | null, signal: string): NewMessage => ({
  id,
  signal,
  key,
  payload: { id },
  parentRunId: null,
});

/** The settlement of a claimed message by its holder; a dead or retried one carries a failure at T0. */
export const settlement = (
  c: ClaimedMessage,
  status: "delivered" | "dead" | "pending" = "delivered",
): Settlement => ({
  id: c.id,
  worker: c.lockedBy,
  attempt: c.attempts,
  status,
  ...(status === "delivered" ? {} : { failure: { code: "E", message: "boom", at: T0, attempt: c.attempts } }),
});

/**
 * What concurrent workers draining the keyed messages `all` took: `take` records claimed messages
 * (an overlap with a message of the same key still held is a violation), `release` lets their keys
 * go — before the settle, so the held set stays a subset of what the database holds inflight and
 * any overlap it sees is a real one. `expectDrainedOnce` checks the end: no overlap, each message
 * claimed once, each key's messages in their order, nothing pending or inflight.
 */
export function keyedDrain(all: readonly NewMessage[]): {
  take: (got: readonly ClaimedMessage[]) => void;
  release: (got: readonly ClaimedMessage[]) => void;
  expectDrainedOnce: (store: Store, signal: string, now: number) => Promise<void>;
} {
  const claims = new Map<string, number>();
  const holding = new Map<string, string>(); // key -> id held right now
  const orderByKey = new Map<string, string[]>();
  const violations: string[] = [];
  return {
    take: (got) => {
      for (const c of got) {
        claims.set(c.id, (claims.get(c.id) ?? 0) + 1);
        const other = holding.get(c.key!);
        if (other !== undefined) violations.push(`${c.key}: ${other} and ${c.id}`);
        holding.set(c.key!, c.id);
        orderByKey.set(c.key!, [...(orderByKey.get(c.key!) ?? []), c.id]);
      }
    },
    release: (got) => {
      for (const c of got) holding.delete(c.key!);
    },
    expectDrainedOnce: async (store, signal, now) => {
      expect(violations).toEqual([]);
      expect(claims.size).toBe(all.length);
      expect([...claims.values()].every((n) => n === 1)).toBe(true);
      for (const [key, ids] of orderByKey) {
        expect(ids).toEqual(all.filter((m) => m.key === key).map((m) => m.id));
      }
      expect(await store.stats(signal, now)).toMatchObject({
        pending: 0,
        inflight: 0,
        delivered: all.length,
      });
    },
  };
}

/**
 * Empties a migrated schema back to the state open() leaves a new one in: every table but
 * `migrations` without rows, every sequence restarted; the tables, indexes and functions stay.
 * Migrating a new schema costs ~0.3 s of DDL on the server (12 tables, 22 indexes) and dropping it
 * ~0.1 s more; emptying one takes a few ms. The caller closes every store on the schema first.
 */
export async function emptySchema(schema: string, url = PG_URL): Promise<void> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    // Referenced tables (schedules ← schedule_fires) can only be emptied after their referrers: each
    // pass deletes what the foreign keys allow, until a pass finds no rows left anywhere.
    await c.query(
      `DO $$
       DECLARE t record; left_rows boolean; passes int := 0;
       BEGIN
         FOR t IN SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                  WHERE n.nspname = ${pg.escapeLiteral(schema)} AND c.relkind = 'S' LOOP
           EXECUTE format('ALTER SEQUENCE %I.%I RESTART', ${pg.escapeLiteral(schema)}, t.relname);
         END LOOP;
         LOOP
           left_rows := false;
           passes := passes + 1;
           FOR t IN SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                    WHERE n.nspname = ${pg.escapeLiteral(schema)} AND c.relkind = 'r' AND c.relname <> 'migrations' LOOP
             BEGIN
               EXECUTE format('DELETE FROM %I.%I', ${pg.escapeLiteral(schema)}, t.relname);
             EXCEPTION WHEN foreign_key_violation THEN
               left_rows := true;
             END;
           END LOOP;
           EXIT WHEN NOT left_rows;
           IF passes > 50 THEN RAISE EXCEPTION 'emptySchema: foreign keys keep rows in %', ${pg.escapeLiteral(schema)}; END IF;
         END LOOP;
       END $$`,
    );
  } finally {
    await c.end();
  }
}

/**
 * The conformance suite's store factory for one variant. Each variant migrates one schema (its
 * first case's open()) and every later case gets it emptied (emptySchema: no rows, sequences
 * restarted) and opens its own store on it, whose open() finds every migration applied, as on every
 * boot after an app's first. A new schema per case cost ~0.45 s of DDL each, 274 times: about 80%
 * of the file's time. postgres-migrate.test.ts tests migrating itself.
 */
export const conformanceFactory = (tag: string, options: Partial<PostgresStoreOptions>) => {
  const schema = freshSchema(tag);
  let migrated = false;
  afterAll(() => dropSchema(schema));
  return async () => {
    if (migrated) await emptySchema(schema);
    migrated = true;
    const store = await openStore(schema, { poolSize: 2, ...options });
    return { store, cleanup: () => store.close() };
  };
};

/** What the PostgreSQL driver claims of the conformance suite's optional parts, in both its modes. */
export const PG_CONFORMANCE_OPTIONS = {
  supportsTx: true,
  claimAtEmit: true,
  leaveToLease: true,
  leaveClaimsToLease: true,
  resettleDelivered: true,
  releaseHold: true,
  terminateRun: true,
  lastTapePosition: true,
  deliveredFailed: true,
  discardPending: true,
  tapeGap: true,
  journalEnds: true,
} as const;
