// Migration 0021 on postgres: a run's appends (alone, with emits, batched) and lease renewals rewrite its row as HOT updates (no new index entries), and updatedAt and the lease still move with them.
import type pg from "pg";
import { describe, expect, it } from "vitest";
import { storeOnOneConnection } from "./test-support.ts";

/** Row updates of `runs` so far and how many of them were HOT, once this session's pending statistics are flushed. */
async function updates(pool: pg.Pool, schema: string): Promise<{ all: number; hot: number }> {
  // Flushed when the session goes idle after this statement, before the next one runs.
  await pool.query("SELECT pg_stat_force_next_flush()");
  const { rows } = await pool.query<{ all: string; hot: string }>(
    `SELECT n_tup_upd AS all, n_tup_hot_upd AS hot FROM pg_stat_user_tables WHERE relid = $1::regclass`,
    [`"${schema}".runs`],
  );
  return { all: Number(rows[0]!.all), hot: Number(rows[0]!.hot) };
}

const step = (runId: string, seq: number, at: number) => ({
  runId,
  seq,
  kind: "step" as const,
  name: `s${seq}`,
  value: seq,
  at,
});

describe("postgres: appends and renewals are HOT updates", () => {
  it("a lone append, an append that emits and a lease renewal add no index entries, and still move updatedAt and the lease", async () => {
    const { store, pool, schema } = await storeOnOneConnection("hot");
    await store.startRun({
      id: "r1",
      flow: "f",
      input: null,
      parentRunId: null,
      owner: "o",
      now: 100,
      leaseMs: 1_000,
    });
    const before = await updates(pool, schema);
    for (let seq = 0; seq < 3; seq++)
      await store.append({
        runId: "r1",
        owner: "o",
        now: 101 + seq,
        leaseMs: 1_000,
        entries: [step("r1", seq, 101 + seq)],
      });
    expect(await store.getRun("r1")).toMatchObject({ updatedAt: 103, leaseExpiresAt: 1_103, createdAt: 100 });
    await store.append({
      runId: "r1",
      owner: "o",
      now: 104,
      leaseMs: 1_000,
      entries: [step("r1", 3, 104)],
      emits: [{ id: "m1", signal: "s", key: null, payload: { n: 1 }, parentRunId: "r1" }],
    });
    await store.renewLease({ runId: "r1", owner: "o", now: 105, leaseMs: 1_000 });
    const after = await updates(pool, schema);
    expect(after.all - before.all).toBe(5);
    expect(after.hot - before.hot).toBe(5);
    expect(await store.getRun("r1")).toMatchObject({
      status: "running",
      updatedAt: 105,
      leaseExpiresAt: 1_105,
    });
    // A lease that lapsed after the renewal is found by the claim (runs_list since 0022), and the take is no HOT update.
    const [taken] = await store.claimDueRuns({
      owner: "o2",
      now: 1_106,
      max: 5,
      leaseMs: 1_000,
      flows: ["f"],
    });
    expect(taken).toMatchObject({ run: { id: "r1", leaseOwner: "o2", updatedAt: 1_106, recoveries: 1 } });
    expect(taken!.entries.map((e) => e.seq)).toEqual([0, 1, 2, 3]);
    await store.finish({ runId: "r1", owner: "o2", now: 1_200, status: "completed", output: 1 });
    expect(await store.getRun("r1")).toMatchObject({ status: "completed", updatedAt: 1_200 });
    const done = await updates(pool, schema);
    expect(done.all - after.all).toBe(2);
    expect(done.hot - after.hot).toBe(0);
  });

  it("appends of runs in flight together share a statement and are HOT updates too", async () => {
    const { store, pool, schema } = await storeOnOneConnection("hot");
    const ids = Array.from({ length: 6 }, (_, i) => `b${i}`);
    await Promise.all(
      ids.map((id) =>
        store.startRun({
          id,
          flow: "f",
          input: null,
          parentRunId: null,
          owner: "o",
          now: 10,
          leaseMs: 1_000,
        }),
      ),
    );
    const before = await updates(pool, schema);
    await Promise.all(
      ids.map((id) =>
        store.append({ runId: id, owner: "o", now: 20, leaseMs: 1_000, entries: [step(id, 0, 20)] }),
      ),
    );
    const after = await updates(pool, schema);
    expect(after.all - before.all).toBe(6);
    expect(after.hot - before.hot).toBe(6);
    for (const id of ids)
      expect(await store.getRun(id)).toMatchObject({ updatedAt: 20, leaseExpiresAt: 1_020 });
  });

  it("without 0021's (flow) indexes (dropped by 0022) the claim and nextWakeAt read the running range from an index, not the table", async () => {
    const plans: string[] = [];
    const { store, pool, schema } = await storeOnOneConnection("hot", { onNotice: (n) => plans.push(n) });
    const s = `"${schema}"`;
    await pool.query(
      `INSERT INTO ${s}.runs (id, flow, status, input, lease_owner, lease_expires_at, wake_at, created_at, updated_at)
       SELECT 'c' || g, 'f', 'completed', 'null'::jsonb, NULL::text, NULL::bigint, NULL::bigint, g, g FROM generate_series(1, 20000) g
       UNION ALL SELECT 'r' || g, 'f', 'running', 'null'::jsonb, 'o', 50000 + g, NULL, g, g FROM generate_series(1, 8) g
       UNION ALL SELECT 's' || g, 'f', 'sleeping', 'null'::jsonb, NULL, NULL, 60000 + g, g, g FROM generate_series(1, 8) g`,
    );
    await pool.query(`ANALYZE ${s}.runs`);
    await pool.query("LOAD 'auto_explain'");
    await pool.query("SET auto_explain.log_min_duration = 0; SET auto_explain.log_level = notice");
    expect(await store.nextWakeAt({ flows: ["f"] })).toBe(50_001);
    expect(await store.nextWakeAt()).toBe(50_001);
    const claimed = await store.claimDueRuns({
      owner: "o2",
      now: 50_002,
      max: 5,
      leaseMs: 1_000,
      flows: ["f"],
    });
    expect(claimed.map((a) => a.run.id).sort()).toEqual(["r1", "r2"]);
    await pool.query("SET auto_explain.log_min_duration = -1");
    const explained = plans.filter((p) => p.includes("Query Text"));
    expect(explained.length).toBeGreaterThanOrEqual(3);
    for (const p of explained) expect(p).not.toMatch(/Seq Scan on runs/);
    expect(
      await pool.query(
        `SELECT indexname FROM pg_indexes WHERE schemaname = $1 AND indexname LIKE '%_flow%'`,
        [schema],
      ),
    ).toMatchObject({ rows: [{ indexname: "runs_wake_flow_id" }] }); // 0011's runs_wake_flow, with id since 0027
  });
});
