// Prepared statements on postgres: a lone emit, a run's start, its journal functions' calls and the lone delivered settle's function call are prepared on their server connection in the default mode, and nothing in poll-only mode (the PgBouncer transaction-pooling setting); the functions' own plans stay on the runs and messages primary keys.
import type pg from "pg";
import { describe, expect, it } from "vitest";
import type { Store } from "../types.ts";
import { settleDeliveredSql } from "./postgres-settle.ts";
import { storeOnOneConnection } from "./test-support.ts";

/** A run started, three one-entry appends and its finish, as a 3-step durable run sends them. */
async function threeStepRun(store: Store, id: string, now: number): Promise<void> {
  await store.startRun({
    id,
    flow: "f",
    input: { i: 1 },
    parentRunId: null,
    owner: "o",
    now,
    leaseMs: 60_000,
  });
  for (let seq = 0; seq < 3; seq++)
    await store.append({
      runId: id,
      owner: "o",
      now,
      leaseMs: 60_000,
      entries: [{ runId: id, seq, kind: "step", name: `s${seq}`, value: seq, at: now }],
    });
  await store.finish({ runId: id, owner: "o", now, status: "completed", output: 3 });
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

/**
 * Six 3-step runs in step: each write of the six at once, so two go alone (two statements in
 * flight per kind) and four share a statement.
 */
async function sixAtOnce(store: Store, prefix: string, now: number): Promise<void> {
  const ids = Array.from({ length: 6 }, (_, i) => `${prefix}${i}`);
  await Promise.all(
    ids.map((id) =>
      store.startRun({ id, flow: "f", input: null, parentRunId: null, owner: "o", now, leaseMs: 60_000 }),
    ),
  );
  for (let seq = 0; seq < 3; seq++)
    await Promise.all(
      ids.map((id) =>
        store.append({
          runId: id,
          owner: "o",
          now,
          leaseMs: 60_000,
          entries: [{ runId: id, seq, kind: "step", name: `s${seq}`, value: seq, at: now }],
        }),
      ),
    );
  await Promise.all(
    ids.map((id) => store.finish({ runId: id, owner: "o", now, status: "completed", output: 3 })),
  );
}

const preparedOn = async (pool: pg.Pool): Promise<string[]> =>
  (await pool.query<{ name: string }>("SELECT name FROM pg_prepared_statements ORDER BY name")).rows.map(
    (r) => r.name,
  );

/**
 * Rounds of k messages (keyed: each of its own key) emitted, claimed by w and settled delivered at
 * `now` in one settle, then the same settle again (a retry: applied again through `done`). A round
 * answers its message ids.
 */
function deliveredRounds(store: Store, keyed: boolean): (k: number, now: number) => Promise<string[]> {
  let n = 0;
  return async (k, now) => {
    const msgs = Array.from({ length: k }, () => {
      const id = `m${n++}`;
      return { id, signal: "s", key: keyed ? `k${n}` : null, payload: null, parentRunId: null };
    });
    await store.enqueue(msgs, now);
    const claimed = await store.claim({ signal: "s", worker: "w", max: k, now, leaseMs: 60_000 });
    expect(claimed).toHaveLength(k);
    const batch = claimed.map((c) => ({
      id: c.id,
      worker: "w",
      attempt: c.attempts,
      status: "delivered" as const,
    }));
    const ids = msgs.map((m) => m.id).sort();
    for (let retry = 0; retry < 2; retry++)
      expect((await store.settle(batch, now + 1)).applied.slice().sort()).toEqual(ids);
    return ids;
  };
}

describe("postgres prepared statements", () => {
  it("prepares the lone emit and the call of the lone settle's function on the connection that ran them", async () => {
    const { store, pool } = await storeOnOneConnection("prep");
    await emitClaimSettle(store);
    const names = await preparedOn(pool);
    expect(names.map((n) => n.split("_")[1]).sort()).toEqual(["enq1", "settled1"]);
  });

  it("prepares nothing in poll-only mode, where a pooler may hand the next statement another connection", async () => {
    const { store, pool } = await storeOnOneConnection("prep", { notify: false });
    await emitClaimSettle(store);
    await threeStepRun(store, "r1", 10);
    expect(await preparedOn(pool)).toEqual([]);
    expect(await store.getJournal("r1")).toHaveLength(3);
  });

  it("prepares a run's start and the calls of its journal functions (append, finish), which keep the fence", async () => {
    const { store, pool } = await storeOnOneConnection("prep");
    await threeStepRun(store, "r1", 10);
    const names = await preparedOn(pool);
    expect(names).toHaveLength(3);
    expect(names.map((n) => n.split("_")[1]).sort()).toEqual(["append1", "finish1", "start1"]);
    expect(await store.getRun("r1")).toMatchObject({ status: "completed", output: 3, leaseOwner: null });
    expect((await store.getJournal("r1")).map((e) => e.seq)).toEqual([0, 1, 2]);
    // The fence: another owner's append and finish are refused, and a finished run takes no more.
    await store.startRun({
      id: "r2",
      flow: "f",
      input: null,
      parentRunId: null,
      owner: "o",
      now: 10,
      leaseMs: 60_000,
    });
    const entry = { runId: "r2", seq: 0, kind: "step" as const, name: "a", value: 1, at: 10 };
    await expect(store.append({ runId: "r2", owner: "x", now: 11, entries: [entry] })).rejects.toThrow();
    await expect(store.finish({ runId: "r2", owner: "x", now: 11, status: "completed" })).rejects.toThrow();
    await expect(
      store.append({ runId: "r1", owner: "o", now: 11, entries: [{ ...entry, runId: "r1", seq: 3 }] }),
    ).rejects.toThrow();
    expect(await store.getJournal("r2")).toEqual([]);
    expect(await store.getRun("r2")).toMatchObject({ status: "running", leaseOwner: "o" });
  });

  it("keeps the journal functions' plans on the runs primary key when they were made on a tiny, analysed table", async () => {
    const plans: string[] = [];
    const { store, pool, schema } = await storeOnOneConnection("prep", {
      onNotice: (text) => plans.push(text),
    });
    const s = `"${schema}"`;
    // Statistics of a 3-row runs (one page): a plan made on them without the function's
    // enable_seqscan = off updates by a sequential scan, and keeps doing so once the table is big.
    for (let i = 0; i < 3; i++)
      await store.startRun({
        id: `tiny${i}`,
        flow: "f",
        input: null,
        parentRunId: null,
        owner: "o",
        now: 10,
        leaseMs: 60_000,
      });
    await pool.query(`ANALYZE ${s}.runs`);
    // Planned now (more than the five custom plans PL/pgSQL makes before it keeps a generic one),
    // alone and in batches (six runs at once: two statements in flight per kind, the rest share one).
    for (let i = 0; i < 8; i++) await threeStepRun(store, `r${i}`, 20);
    for (let i = 0; i < 8; i++) await sixAtOnce(store, `b${i}`, 20);
    await pool.query(`INSERT INTO ${s}.runs (id, flow, status, created_at, updated_at)
      SELECT 'big' || g, 'f', 'completed', g, g FROM generate_series(1, 20000) g`);
    await pool.query("LOAD 'auto_explain'");
    await pool.query(
      "SET auto_explain.log_min_duration = 0; SET auto_explain.log_nested_statements = on; SET auto_explain.log_level = notice",
    );
    for (let i = 0; i < 3; i++) await threeStepRun(store, `last${i}`, 30);
    await sixAtOnce(store, "lastb", 30);
    await pool.query("SET auto_explain.log_min_duration = -1");
    const batched = plans.filter((p) => /Update on runs/.test(p) && /unnest/.test(p));
    expect(batched.length).toBeGreaterThan(0);
    for (const p of batched) {
      expect(p).toMatch(/Index Scan (using|on) runs_pkey/);
      expect(p).not.toMatch(/Seq Scan on runs|runs_list|runs_page/);
    }
    const updates = plans.filter((p) => /Update on runs/.test(p) && !/unnest/.test(p)).slice(0, 12);
    // Per run three appends and the finish, each an UPDATE of runs through its primary key: a plain
    // or a bitmap index scan (PostgreSQL may keep planning per call when the generic plan's cost
    // is not the lower), never a sequential scan or another index.
    expect(updates).toHaveLength(12);
    for (const p of updates) {
      expect(p).toMatch(/Index Scan (using|on) runs_pkey/);
      expect(p).not.toMatch(/Seq Scan|runs_list|runs_page/);
    }
    expect(await store.getRun("last2")).toMatchObject({ status: "completed" });
    expect(await store.getRun("lastb5")).toMatchObject({ status: "completed" });
    expect(await store.getJournal("lastb5")).toHaveLength(3);
    const names = (await preparedOn(pool)).map((n) => n.split("_")[1]).sort();
    expect(names).toEqual(["append1", "appendN", "finish1", "finishN", "start1", "startN"]);
  });
  it("keeps the lone delivered settle's plan on the messages primary key when it was made on a tiny, analysed table", async () => {
    const plans: string[] = [];
    const { store, pool, schema } = await storeOnOneConnection("prep", {
      onNotice: (text) => plans.push(text),
    });
    const s = `"${schema}"`;
    const round = deliveredRounds(store, true);
    // Statistics of a 3-row messages (one page): a plan made on them without the function's
    // enable_seqscan = off updates by a sequential scan, and keeps doing so once the table is big.
    await round(3, 10);
    await pool.query(`ANALYZE ${s}.messages`);
    // Planned now: more than the five custom plans PL/pgSQL makes before it keeps a generic one.
    for (let i = 0; i < 8; i++) await round(1, 20);
    await pool.query(`INSERT INTO ${s}.messages (id, signal, key, status, attempts, created_at, updated_at)
      SELECT 'big' || g, 's', 'b' || g, 'delivered', 1, g, g FROM generate_series(1, 20000) g`);
    await pool.query("LOAD 'auto_explain'");
    await pool.query(
      "SET auto_explain.log_min_duration = 0; SET auto_explain.log_nested_statements = on; SET auto_explain.log_level = notice",
    );
    const [last] = await round(1, 30);
    await pool.query("SET auto_explain.log_min_duration = -1");
    // The lone settle and its retry (the settle's query text has the retry's `done`; the claim
    // updates messages too), each an UPDATE of messages through its primary key.
    const updates = plans.filter((p) => /Update on messages/.test(p) && /done AS/.test(p));
    expect(updates).toHaveLength(2);
    for (const p of updates) {
      expect(p).toMatch(/Index Scan (using|on) messages_pkey/);
      expect(p).not.toMatch(/Seq Scan on messages/);
    }
    expect(await store.getMessage(last!)).toMatchObject({ status: "delivered", updatedAt: 31 });
    expect((await preparedOn(pool)).map((x) => x.split("_")[1])).toContain("settled1");
  });
  it("keeps the keyed claim's plan (claim_messages) off sequential and bitmap scans when it was made on a tiny, analysed table", async () => {
    const plans: string[] = [];
    const { store, pool, schema } = await storeOnOneConnection("prep", {
      onNotice: (text) => plans.push(text),
    });
    const s = `"${schema}"`;
    const keyed = (id: string, key: string) => ({ id, signal: "s", key, payload: null, parentRunId: null });
    // Planned on a 3-row, analysed messages (one page): the function keeps this generic plan.
    await store.enqueue([keyed("a1", "a"), keyed("a2", "a"), keyed("b1", "b")], 10);
    await pool.query(`ANALYZE ${s}.messages`);
    const first = await store.claim({ signal: "s", worker: "w", max: 10, now: 11, leaseMs: 60_000 });
    expect(first.map((c) => c.id)).toEqual(["a1", "b1"]);
    // 20 000 more keyed messages over 1 000 keys, emitted round-robin (k0 … k999, then again).
    await pool.query(`INSERT INTO ${s}.messages (id, signal, key, created_at, updated_at)
      SELECT 'big' || lpad(g::text, 6, '0'), 's', 'k' || (g % 1000), g, g FROM generate_series(0, 19999) g ORDER BY g`);
    await pool.query("LOAD 'auto_explain'");
    await pool.query(
      "SET auto_explain.log_min_duration = 0; SET auto_explain.log_nested_statements = on; SET auto_explain.log_level = notice",
    );
    const next = await store.claim({ signal: "s", worker: "w", max: 50, now: 12, leaseMs: 60_000 });
    await pool.query("SET auto_explain.log_min_duration = -1");
    // The heads of k0 … k49 (key a's second message waits for a1).
    expect(next.map((c) => c.id)).toEqual(
      Array.from({ length: 50 }, (_, i) => `big${String(i).padStart(6, "0")}`),
    );
    const claims = plans.filter((p) => /Update on messages/.test(p) && /keyed_cand AS/.test(p));
    expect(claims).toHaveLength(1);
    const plan = claims[0]!;
    expect(plan).not.toMatch(/Seq Scan on messages/);
    expect(plan).not.toMatch(/Bitmap Heap Scan on messages/);
    expect(plan).toMatch(/Tid Scan on messages/);
    expect(plan).toMatch(/Index Scan using messages_ready_keyed on messages/);
    expect((await preparedOn(pool)).map((x) => x.split("_")[1])).toContain("claim");
  });
  it("keeps the batch delivered settle's plan (settle_delivered_batch) on the messages primary key, without nested loops, when it was made on a tiny, analysed table", async () => {
    const plans: string[] = [];
    const { store, pool, schema } = await storeOnOneConnection("prep", {
      onNotice: (text) => plans.push(text),
    });
    const s = `"${schema}"`;
    const round = deliveredRounds(store, false);
    await round(3, 10);
    await pool.query(`ANALYZE ${s}.messages`);
    await round(3, 20); // planned now, on a 3-row analysed table, and kept
    await pool.query(`INSERT INTO ${s}.messages (id, signal, key, status, attempts, created_at, updated_at)
      SELECT 'big' || g, 's', NULL, 'delivered', 1, g, g FROM generate_series(1, 20000) g`);
    await pool.query("LOAD 'auto_explain'");
    await pool.query(
      "SET auto_explain.log_min_duration = 0; SET auto_explain.log_nested_statements = on; SET auto_explain.log_level = notice",
    );
    await round(130, 30);
    await pool.query("SET auto_explain.log_min_duration = -1");
    // The settle and its retry (applied again through `done`), each an UPDATE through messages_pkey.
    const settles = plans.filter(
      (p) => /Update on messages/.test(p) && /done AS/.test(p) && /unnest/.test(p),
    );
    expect(settles).toHaveLength(2);
    for (const p of settles) {
      expect(p).toMatch(/Index Scan using messages_pkey on messages/);
      expect(p).not.toMatch(/Seq Scan on messages|Bitmap Heap Scan on messages|Nested Loop/);
    }
    expect((await preparedOn(pool)).map((x) => x.split("_")[1])).toContain("settledn");
    const { rows } = await pool.query<{ src: string }>(
      "SELECT prosrc AS src FROM pg_proc WHERE proname = 'settle_delivered_batch' AND pronamespace = $1::regnamespace",
      [s],
    );
    expect(rows[0]!.src).toContain(
      `RETURN QUERY${settleDeliveredSql(s).replace(") AS notified", ")::text AS notified")};`,
    );
  });
});
