// Prepared statements on postgres: a lone emit is prepared on its server connection in the default mode (a settle, an UPDATE whose generic plan could go stale, never), and nothing in poll-only mode (the PgBouncer transaction-pooling setting).
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import type { Store } from "../types.ts";
import { createPostgresStore } from "./postgres-store.ts";
import { dropSchema, freshSchema, PG_URL } from "./test-support.ts";

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()!();
});

/** A store on a pool of one connection, so the test reads the same server session the store wrote on. */
async function storeOnOneConnection(notify: boolean): Promise<{ store: Store; pool: pg.Pool }> {
  const schema = freshSchema("prep");
  cleanups.push(() => dropSchema(schema));
  const pool = new pg.Pool({ connectionString: PG_URL, max: 1 });
  cleanups.push(() => pool.end());
  const store = createPostgresStore({
    pool,
    connectionString: PG_URL,
    schema,
    notify,
    pollIntervalMs: 3_600_000,
  });
  cleanups.push(() => store.close());
  await store.open();
  return { store, pool };
}

/** A lone emit, its claim and its lone delivered settle; the message ends delivered. */
async function emitClaimSettle(store: Store): Promise<void> {
  await store.enqueue([{ id: "m1", signal: "s", key: null, payload: { n: 1 }, parentRunId: null }], 1);
  const [c] = await store.claim({ signal: "s", worker: "w", max: 1, now: 2, leaseMs: 60_000 });
  expect(c).toMatchObject({ id: "m1", attempts: 1 });
  expect(await store.settle([{ id: "m1", worker: "w", attempt: 1, status: "delivered" }], 3)).toEqual({
    applied: ["m1"],
  });
  expect(await store.getMessage("m1")).toMatchObject({ status: "delivered", updatedAt: 3 });
}

const preparedOn = async (pool: pg.Pool): Promise<string[]> =>
  (await pool.query<{ name: string }>("SELECT name FROM pg_prepared_statements ORDER BY name")).rows.map(
    (r) => r.name,
  );

describe("postgres prepared statements", () => {
  it("prepares the lone emit on the connection that ran it, and not the settle", async () => {
    const { store, pool } = await storeOnOneConnection(true);
    await emitClaimSettle(store);
    const names = await preparedOn(pool);
    expect(names).toHaveLength(1);
    expect(names[0]).toMatch(/^oke_enq1_/);
  });

  it("prepares nothing in poll-only mode, where a pooler may hand the next statement another connection", async () => {
    const { store, pool } = await storeOnOneConnection(false);
    await emitClaimSettle(store);
    expect(await preparedOn(pool)).toEqual([]);
  });
});
