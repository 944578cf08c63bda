/**
 * EXPLAIN (ANALYZE, BUFFERS) of the keyed claim as claim_messages plans it (generic plan made on a
 * near-empty table, the function's settings), in S5's state: 1 000 keys × 50, HOLD held.
 *
 *   node --import tsx bench/s5-claim-explain.ts [--hold=532] [--max=130]
 */
import { createRequire } from "node:module";
import type pgTypes from "pg";
import { benchLogger } from "./compare/logger.ts";
import { createPostgresStore } from "../src/store/postgres/postgres-store.ts";
import { claimCall, claimSql } from "../src/store/postgres/postgres-claim.ts";
import { settleDeliveredBatchCall } from "../src/store/postgres/postgres-settle.ts";

const pg = createRequire(new URL("../package.json", import.meta.url))("pg") as typeof pgTypes;
const arg = (name: string, def: string): string =>
  process.argv.find((a) => a.startsWith(`--${name}=`))?.split("=")[1] ?? def;
const hold = Number(arg("hold", "532"));
const max = Number(arg("max", "130"));
const DB_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const schema = `s5_explain_${process.pid}`;
const s = `"${schema}"`;
const store = createPostgresStore({ connectionString: DB_URL, schema, logger: benchLogger() });
await store.open();
const c = new pg.Client({ connectionString: DB_URL });
await c.connect();
await c.query(
  "SET plan_cache_mode = force_generic_plan; SET enable_seqscan = off; SET enable_bitmapscan = off",
);
await c.query(`INSERT INTO ${s}.messages (id, signal, key, payload, created_at, updated_at)
  SELECT 'x' || g, 'bench.jobs', 'k' || g, '{}', 1, 1 FROM generate_series(1, 3) g`);
await c.query(`PREPARE cl(text, bigint, integer, text, bigint) AS ${claimSql(s)}`);
await c.query(`EXECUTE cl('bench.jobs', 1, 10, 'w0', 1)`);
await c.query(`DELETE FROM ${s}.messages`);
await c.query(`INSERT INTO ${s}.messages (id, signal, key, payload, created_at, updated_at)
  SELECT 'm' || lpad(g::text, 8, '0'), 'bench.jobs', 'k' || (g % 1000), jsonb_build_object('n', g), 1, 1
  FROM generate_series(0, 49999) g ORDER BY g`);
const r = await c.query<{ id: string; attempts: number }>(claimCall(s).text, [
  "bench.jobs",
  1000,
  hold,
  "w1",
  600_000,
]);
let held = r.rows;
// Settle a few rounds so the table has the drain's dead versions.
for (let i = 0; i < 5; i++) {
  const out = held.slice(0, max);
  held = held.slice(max);
  await c.query(settleDeliveredBatchCall(s).text, [
    out.map((x) => x.id),
    out.map((x) => x.attempts),
    1001 + i,
    "w1",
    null,
    "o",
  ]);
  const b = await c.query<{ id: string; attempts: number }>(claimCall(s).text, [
    "bench.jobs",
    1001 + i,
    hold - held.length,
    "w1",
    600_000,
  ]);
  held.push(...b.rows);
}
const out = held.slice(0, max);
await c.query(settleDeliveredBatchCall(s).text, [
  out.map((x) => x.id),
  out.map((x) => x.attempts),
  2000,
  "w1",
  null,
  "o",
]);
await c.query("BEGIN");
const e = await c.query<{ "QUERY PLAN": string }>(
  `EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) EXECUTE cl('bench.jobs', 2000, ${max}, 'w1', 600000)`,
);
console.log(e.rows.map((x) => x["QUERY PLAN"]).join("\n"));
await c.query("ROLLBACK");
await c.query(`DROP SCHEMA ${s} CASCADE`);
await c.end();
await store.close();
