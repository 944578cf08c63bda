/**
 * S10's question in plans: do the fast claim and the batch settle cost more with 1 000 000 delivered
 * messages and 200 000 finished runs retained than on empty tables? EXPLAIN (ANALYZE, BUFFERS) of
 * both statements as the store sends them, on two schemas holding the same pending backlog, each
 * inside a transaction rolled back; plus the messages indexes' sizes.
 *
 *   node --import tsx bench/s10-plans.ts [retained=1000000] [runs=200000] [pending=10000] [reps=3]
 *
 * Env: BENCH_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/okengine_bench).
 */
import pg from "pg";
import { fillRetained } from "./compare/production.ts";
import { DATABASE_URL, ensureDatabase } from "./compare/env.ts";
import { fastClaimSql } from "../src/store/postgres/postgres-claim.ts";
import { settleDeliveredSql } from "../src/store/postgres/postgres-settle.ts";
import { createPostgresStore } from "../src/store/postgres/postgres-store.ts";

const [retained = 1_000_000, runs = 200_000, pending = 10_000, reps = 3] = process.argv.slice(2).map(Number);
const SIGNAL = "bench.jobs";
const schemas = { empty: `oke_s10_plans_empty_${process.pid}`, big: `oke_s10_plans_big_${process.pid}` };
await ensureDatabase();
const c = new pg.Client({ connectionString: DATABASE_URL });
await c.connect();

/** Planning, execution and the top node's buffers of one EXPLAIN (ANALYZE, BUFFERS). */
async function explain(sql: string, params: unknown[]): Promise<string> {
  const { rows } = await c.query<{ "QUERY PLAN": string }>(`EXPLAIN (ANALYZE, BUFFERS) ${sql}`, params);
  const lines = rows.map((r) => r["QUERY PLAN"]);
  const pick = (re: RegExp) => lines.find((l) => re.test(l))?.trim() ?? "";
  const scans = lines.filter((l) => /Scan/.test(l)).map((l) => l.trim().replace(/\s+\(cost.*$/, ""));
  return [
    pick(/^Planning Time/),
    pick(/^Execution Time/),
    lines.find((l) => /Buffers/.test(l))?.trim(),
    ...new Set(scans),
  ].join(" | ");
}

const out: Record<string, unknown> = {};
try {
  for (const [state, s] of Object.entries(schemas)) {
    await c.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`);
    const store = createPostgresStore({ connectionString: DATABASE_URL, schema: s });
    await store.open();
    await store.close();
    if (state === "big") await fillRetained(s, retained, runs);
    const now = Date.now();
    await c.query(
      `INSERT INTO "${s}".messages (id, signal, key, payload, status, attempts, created_at, updated_at)
       SELECT 'new-' || g, $1, NULL, jsonb_build_object('n', g), 'pending', 0, $2, $2 FROM generate_series(1, $3::bigint) g`,
      [SIGNAL, now, pending],
    );
    await c.query(`VACUUM ANALYZE "${s}".messages`);
  }
  for (let r = 0; r < reps; r++)
    for (const [state, s] of r % 2 === 0 ? Object.entries(schemas) : Object.entries(schemas).reverse()) {
      const now = Date.now();
      const claimParams = [SIGNAL, now, 256, "w1", 30_000];
      await c.query("BEGIN");
      const claim = await explain(fastClaimSql(`"${s}"`), claimParams);
      await c.query("ROLLBACK");
      await c.query("BEGIN");
      const { rows } = await c.query<{ id: string; attempts: number }>(fastClaimSql(`"${s}"`), claimParams);
      const got = rows.filter((x) => x.id !== null);
      const settle = await explain(settleDeliveredSql(`"${s}"`), [
        got.map((x) => x.id),
        got.map((x) => x.attempts),
        now + 1,
        "w1",
        null,
        "bench",
      ]);
      await c.query("ROLLBACK");
      out[`round ${r + 1} ${state}`] = { claim256: claim, settle256: settle };
    }
  for (const [state, s] of Object.entries(schemas)) {
    const { rows } = await c.query<{ name: string; size: string }>(
      `SELECT indexrelid::regclass::text AS name, pg_size_pretty(pg_relation_size(indexrelid)) AS size
       FROM pg_index WHERE indrelid = format('%I.messages', $1::text)::regclass ORDER BY 1`,
      [s],
    );
    out[`indexes ${state}`] = Object.fromEntries(rows.map((x) => [x.name.replace(/^.*\./, ""), x.size]));
  }
} finally {
  for (const s of Object.values(schemas)) await c.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`);
  await c.end();
}
console.log(JSON.stringify(out, null, 2));
