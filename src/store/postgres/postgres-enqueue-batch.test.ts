// Group commit of concurrent emits on postgres: order, errors, one statement.
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NewMessage, Store } from "../types.ts";
import { dropSchema, freshSchema, openStore, PG_URL } from "./test-support.ts";

const schema = freshSchema("group");
let store: Store;
/** The store's own pool, counting the INSERTs into messages it runs (each one a statement and a commit). */
const pool = new pg.Pool({ connectionString: PG_URL, max: 4 });
let inserts = 0;
const query = pool.query.bind(pool) as (...args: unknown[]) => Promise<unknown>;
pool.query = ((...args: unknown[]) => {
  const text = typeof args[0] === "string" ? args[0] : (args[0] as { text?: string } | undefined)?.text;
  if (text !== undefined && /INSERT INTO\s+"[^"]+"\.messages/i.test(text)) inserts++;
  return query(...args);
}) as typeof pool.query;
const msg = (id: string, key: string | null = null): NewMessage => ({
  id,
  signal: "g",
  key,
  payload: { id },
  parentRunId: null,
});

beforeAll(async () => {
  store = await openStore(schema, { pool });
});
afterAll(async () => {
  await store.close();
  await pool.end();
  await dropSchema(schema);
});

describe("postgres enqueue group commit", () => {
  it("1 000 concurrent enqueues share a few statements, all committed, in arrival order", async () => {
    const before = inserts;
    await Promise.all(
      Array.from({ length: 1000 }, (_, i) => store.enqueue([msg(`m${String(i).padStart(4, "0")}`, "k")], 1)),
    );
    const statements = inserts - before;
    const c = new pg.Client({ connectionString: PG_URL });
    await c.connect();
    const { rows } = await c.query<{ id: string }>(`SELECT id FROM "${schema}".messages ORDER BY seq`);
    await c.end();
    expect(rows.map((r) => r.id)).toEqual(
      Array.from({ length: 1000 }, (_, i) => `m${String(i).padStart(4, "0")}`),
    );
    // Counted on this store's own pool, so other test files cannot move it: the first caller goes out
    // alone, the 999 that arrive while it is in flight share the next statement.
    expect(statements).toBeGreaterThanOrEqual(1);
    expect(statements).toBeLessThanOrEqual(3);
  });

  it("a duplicate id fails only its own caller; the others in the shared statement commit", async () => {
    await store.enqueue([msg("dup")], 1);
    const results = await Promise.allSettled([
      store.enqueue([msg("a1")], 2),
      store.enqueue([msg("dup")], 2),
      store.enqueue([msg("a2")], 2),
      store.enqueue([msg("a3")], 2),
    ]);
    expect(results.map((r) => r.status)).toEqual(["fulfilled", "rejected", "fulfilled", "fulfilled"]);
    expect((results[1] as PromiseRejectedResult).reason).toMatchObject({ code: "OKE1261" });
    for (const id of ["a1", "a2", "a3"])
      expect(await store.getMessage(id)).toMatchObject({ id, status: "pending" });
  });
});
