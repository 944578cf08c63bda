/**
 * What one index costs the drain's writes on PostgreSQL, load-independent: the same claim and settle
 * statements the store sends (claimSql's unkeyed gate, settleDeliveredSql), 500 rows at a time over a
 * queue of N unkeyed messages, under EXPLAIN (ANALYZE, BUFFERS, WAL) — WAL bytes, buffers dirtied and
 * execution time per message — with and without the named index, in alternating passes.
 *
 *   node --import tsx bench/settle-index-cost.ts [--n=50000] [--passes=4] [--index=messages_delivered_signal]
 */
import { createRequire } from "node:module";
import type pgTypes from "pg";
import { benchLogger } from "./compare/logger.ts";
import { createPostgresStore } from "../src/store/postgres/postgres-store.ts";
import { fastClaimSql } from "../src/store/postgres/postgres-claim.ts";
import { settleDeliveredSql } from "../src/store/postgres/postgres-settle.ts";

const pg = createRequire(new URL("../package.json", import.meta.url))("pg") as typeof pgTypes;
const arg = (name: string, def: string): string =>
  process.argv.find((a) => a.startsWith(`--${name}=`))?.split("=")[1] ?? def;
const n = Number(arg("n", "50000"));
const passes = Number(arg("passes", "4"));
const index = arg("index", "messages_delivered_signal");
const DB_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const schema = `hotpath_idx_${process.pid}`;
const s = `"${schema}"`;
const BATCH = 500;

const store = createPostgresStore({ connectionString: DB_URL, schema, logger: benchLogger() });
await store.open();
const c = new pg.Client({ connectionString: DB_URL });
await c.connect();
const indexDef = (
  await c.query<{ d: string }>(
    `SELECT indexdef AS d FROM pg_indexes WHERE schemaname = $1 AND indexname = $2`,
    [schema, index],
  )
).rows[0]?.d;
if (indexDef === undefined) throw new Error(`no index ${index} in ${schema}`);

interface Cost {
  ms: number;
  planMs: number;
  walBytes: number;
  walRecords: number;
  dirtied: number;
}
const zero = (): Cost => ({ ms: 0, planMs: 0, walBytes: 0, walRecords: 0, dirtied: 0 });
function add(to: Cost, plan: Record<string, unknown>, ms: number, planMs: number): void {
  to.ms += ms;
  to.planMs += planMs;
  to.walBytes += Number(plan["WAL Bytes"] ?? 0);
  to.walRecords += Number(plan["WAL Records"] ?? 0);
  to.dirtied += Number(plan["Shared Dirtied Blocks"] ?? 0);
}

async function pass(withIndex: boolean): Promise<{ claim: Cost; settle: Cost }> {
  await c.query(`TRUNCATE ${s}.messages`);
  await c.query(`DROP INDEX IF EXISTS ${s}.${index}`);
  if (withIndex) await c.query(indexDef!);
  await c.query(
    `INSERT INTO ${s}.messages (id, signal, key, payload, parent_run_id, created_at, updated_at)
     SELECT 'm' || lpad(g::text, 8, '0'), 'bench.jobs', NULL, jsonb_build_object('n', g, 'j', 0, 'key', NULL), NULL, 1, 1
     FROM generate_series(1, $1) g`,
    [n],
  );
  await c.query(`VACUUM ANALYZE ${s}.messages`);
  const claim = zero();
  const settle = zero();
  for (let done = 0; done < n; done += BATCH) {
    const now = 1_000 + done;
    const explain = async (sql: string, params: unknown[], to: Cost): Promise<unknown[]> => {
      await c.query("BEGIN");
      const r = await c.query<{
        "QUERY PLAN": [{ Plan: Record<string, unknown>; "Execution Time": number; "Planning Time": number }];
      }>(`EXPLAIN (ANALYZE, BUFFERS, WAL, FORMAT JSON) ${sql}`, params);
      const top = r.rows[0]!["QUERY PLAN"][0];
      add(to, top.Plan, top["Execution Time"], top["Planning Time"]);
      await c.query("COMMIT");
      return [];
    };
    await explain(fastClaimSql(s), ["bench.jobs", now, BATCH, "w1", 60_000], claim);
    const ids = (
      await c.query<{ id: string }>(
        `SELECT id FROM ${s}.messages WHERE status = 'inflight' AND locked_by = 'w1' ORDER BY seq`,
      )
    ).rows.map((r) => r.id);
    await explain(settleDeliveredSql(s), [ids, ids.map(() => 1), now + 1, "w1", null, "o"], settle);
  }
  return { claim, settle };
}

const per = (x: Cost): string =>
  `${((x.ms * 1_000) / n).toFixed(1)} µs (+ planning ${((x.planMs * 1_000) / n).toFixed(1)}), ${(x.walBytes / n).toFixed(0)} WAL B, ${(x.walRecords / n).toFixed(2)} WAL rec, ${(x.dirtied / n).toFixed(3)} dirtied`;
console.log(`${n} unkeyed messages, claim + settle ${BATCH} at a time, index ${index} on / off alternating`);
for (let p = 0; p < passes; p++) {
  for (const withIndex of p % 2 === 0 ? [true, false] : [false, true]) {
    const r = await pass(withIndex);
    console.log(
      `  ${withIndex ? "with   " : "without"}: claim ${per(r.claim)} | settle ${per(r.settle)} per message`,
    );
  }
}
await c.query(`DROP SCHEMA ${s} CASCADE`);
await c.end();
await store.close();
