// The postgres write lane: concurrent emits share one statement in order, and emits, Idempotency-Key claims and completions that arrive together share one too.
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NewMessage, Store } from "../types.ts";
import { dropSchema, freshSchema, openStore, PG_URL } from "./test-support.ts";

const schema = freshSchema("group");
let store: Store;
/** The store's own pool, counting the INSERTs into messages it runs (each one a statement and a commit). */
const pool = new pg.Pool({ connectionString: PG_URL, max: 4 });
let inserts = 0;
/** Statements that wrote messages and idempotency keys at once. */
let combined = 0;
const query = pool.query.bind(pool) as (...args: unknown[]) => Promise<unknown>;
pool.query = ((...args: unknown[]) => {
  const text = typeof args[0] === "string" ? args[0] : (args[0] as { text?: string } | undefined)?.text;
  if (text !== undefined && /INSERT INTO\s+"[^"]+"\.messages/i.test(text)) {
    inserts++;
    if (text.includes("idempotency_keys")) combined++;
  }
  return query(...args);
}) as typeof pool.query;
const W = 3_600_000;
const claimReq = (key: string, now: number) => ({
  key,
  fingerprint: `fp-${key}`,
  runId: `run-${key}`,
  now,
  lockMs: 60_000,
  windowMs: W,
});
const completeReq = (key: string, now: number) => ({
  key,
  fingerprint: `fp-${key}`,
  response: { status: 200, body: JSON.stringify({ key }) },
  now,
  runId: `run-${key}`,
  windowMs: W,
});
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

describe("postgres write lane", () => {
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

  it("emits, claims and a parked completion that arrive together share one statement, and each gets its own outcome", async () => {
    const heard: string[] = [];
    const unsubscribe = store.subscribe((e) => e.kind === "enqueued" && heard.push(e.signal));
    try {
      expect(await store.claimIdempotencyKey(claimReq("c0", 10))).toEqual({ kind: "claimed" });
      const completed = store.completeIdempotencyKey(completeReq("c0", 11)); // parked
      const before = combined;
      // Everything called in one tick shares one statement, the parked completion included; the
      // claim of c0 has its key's completion ahead of it there, so it goes alone after it.
      const first = store.enqueue([msg("w0")], 12);
      const results = await Promise.all([
        store.claimIdempotencyKey(claimReq("c1", 12)),
        store.enqueue([msg("w1", "wk")], 12),
        store.claimIdempotencyKey(claimReq("c2", 12)),
        store.enqueue([msg("w2", "wk"), msg("w3")], 12),
        store.claimIdempotencyKey(claimReq("c0", 12)), // done by the shared statement
        first,
        completed,
      ]);
      expect(combined - before).toBe(1);
      expect(results[0]).toEqual({ kind: "claimed" });
      expect(results[2]).toEqual({ kind: "claimed" });
      expect(results[4]).toMatchObject({ kind: "existing", record: { status: "done" } });
      expect(results[6]).toBe("completed");
      expect(await store.getIdempotencyKey("c0")).toMatchObject({
        status: "done",
        response: { status: 200, body: JSON.stringify({ key: "c0" }) },
      });
      expect(await store.getIdempotencyKey("c1")).toMatchObject({ status: "running", runId: "run-c1" });
      const c = new pg.Client({ connectionString: PG_URL });
      await c.connect();
      const { rows } = await c.query<{ id: string; status: string }>(
        `SELECT id, status FROM "${schema}".messages WHERE id = ANY($1) ORDER BY seq`,
        [["w0", "w1", "w2", "w3"]],
      );
      await c.end();
      // Call order kept within the shared statement (per-key FIFO depends on it).
      expect(rows).toEqual(["w0", "w1", "w2", "w3"].map((id) => ({ id, status: "pending" })));
      expect(heard).toContain("g"); // the shared statement announced its messages
    } finally {
      unsubscribe();
    }
  });

  it("messages written already claimed ride with claims too, and are not announced", async () => {
    const heard: string[] = [];
    const unsubscribe = store.subscribe((e) => e.kind === "enqueued" && heard.push(e.signal));
    try {
      const before = combined;
      const first = store.enqueue([{ ...msg("x0"), signal: "other" }], 20);
      const [claimed, k1] = await Promise.all([
        store.enqueueClaimed!([{ ...msg("x1"), signal: "held" }], 20, { worker: "w-1", leaseMs: 30_000 }),
        store.claimIdempotencyKey(claimReq("x-key", 20)),
        first,
      ]);
      expect(combined - before).toBe(1);
      expect(k1).toEqual({ kind: "claimed" });
      expect(claimed).toMatchObject([{ id: "x1", lockedBy: "w-1", attempts: 1 }]);
      expect(await store.getMessage("x1")).toMatchObject({ status: "inflight", attempts: 1 });
      expect(heard).not.toContain("held");
    } finally {
      unsubscribe();
    }
  });

  it("a duplicate emit in a shared statement fails only its caller: the claims beside it still claim", async () => {
    await store.enqueue([msg("dup2")], 30);
    const first = store.enqueue([msg("y0")], 31);
    const results = await Promise.allSettled([
      store.claimIdempotencyKey(claimReq("y-a", 31)),
      store.enqueue([msg("dup2")], 31),
      store.enqueue([msg("y1")], 31),
      store.claimIdempotencyKey(claimReq("y-b", 31)),
      first,
    ]);
    expect(results.map((r) => r.status)).toEqual([
      "fulfilled",
      "rejected",
      "fulfilled",
      "fulfilled",
      "fulfilled",
    ]);
    expect((results[1] as PromiseRejectedResult).reason).toMatchObject({ code: "OKE1261" });
    expect((results[0] as PromiseFulfilledResult<unknown>).value).toEqual({ kind: "claimed" });
    expect((results[3] as PromiseFulfilledResult<unknown>).value).toEqual({ kind: "claimed" });
    expect(await store.getMessage("y1")).toMatchObject({ status: "pending" });
    expect(await store.getIdempotencyKey("y-b")).toMatchObject({ status: "running" });
  });
});
