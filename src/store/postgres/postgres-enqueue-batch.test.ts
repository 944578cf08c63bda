// Group commit of concurrent emits on postgres: order, errors, one statement.
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NewMessage, Store } from "../types.ts";
import { dropSchema, freshSchema, openStore, PG_URL } from "./test-support.ts";

const schema = freshSchema("group");
let store: Store;
const msg = (id: string, key: string | null = null): NewMessage => ({
  id,
  signal: "g",
  key,
  payload: { id },
  parentRunId: null,
});

beforeAll(async () => {
  store = await openStore(schema);
});
afterAll(async () => {
  await store.close();
  await dropSchema(schema);
});

describe("postgres enqueue group commit", () => {
  it("1 000 concurrent enqueues share a few statements, all committed, in arrival order", async () => {
    const c = new pg.Client({ connectionString: PG_URL });
    await c.connect();
    const before = await c.query<{ n: string }>(
      "SELECT xact_commit::text AS n FROM pg_stat_database WHERE datname = current_database()",
    );
    await Promise.all(
      Array.from({ length: 1000 }, (_, i) => store.enqueue([msg(`m${String(i).padStart(4, "0")}`, "k")], 1)),
    );
    const after = await c.query<{ n: string }>(
      "SELECT xact_commit::text AS n FROM pg_stat_database WHERE datname = current_database()",
    );
    const { rows } = await c.query<{ id: string }>(`SELECT id FROM "${schema}".messages ORDER BY seq`);
    await c.end();
    expect(rows.map((r) => r.id)).toEqual(
      Array.from({ length: 1000 }, (_, i) => `m${String(i).padStart(4, "0")}`),
    );
    // Commits across the whole database (other test files run too): far fewer than one per emit.
    expect(Number(after.rows[0]!.n) - Number(before.rows[0]!.n)).toBeLessThan(500);
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
