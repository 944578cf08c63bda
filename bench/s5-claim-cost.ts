/**
 * Server CPU of S5's keyed claim and settle on one backend, load-independent: 1 000 keys × 50 keyed
 * messages, a claim up to HOLD held (the app's prefetch), then in turn a settle of the oldest SETTLE
 * held and a claim back up to HOLD — the statements the store sends (claimSql, settleDeliveredSql) —
 * with the backend's utime + stime from /proc per message claimed and settled. `--perf` prints the backend pid and
 * waits 3 s before the loop, for `perf record -p PID`.
 *
 *   node --import tsx bench/s5-claim-cost.ts [--rounds=60] [--passes=3] [--small] [--settle | --vs0023]
 *
 * --vs0023: both passes call a function and settle through 0024's; one runs migration 0023's
 * claim_messages body (created beside as claim_messages_0023) with messages_key_inflight present,
 * the other the current claim_messages (0026) with that index dropped.
 */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import type pgTypes from "pg";
import { benchLogger } from "./compare/logger.ts";
import { createPostgresStore } from "../src/store/postgres/postgres-store.ts";
import { claimCall, claimSql } from "../src/store/postgres/postgres-claim.ts";
import { settleDeliveredBatchCall, settleDeliveredSql } from "../src/store/postgres/postgres-settle.ts";
import { m0023 } from "../src/store/postgres/migrations/0023-claim-function.ts";

const pg = createRequire(new URL("../package.json", import.meta.url))("pg") as typeof pgTypes;
const arg = (name: string, def: string): string =>
  process.argv.find((a) => a.startsWith(`--${name}=`))?.split("=")[1] ?? def;
const rounds = Number(arg("rounds", "60"));
const passes = Number(arg("passes", "3"));
const DB_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const schema = `s5_claim_${process.pid}`;
const s = `"${schema}"`;
const small = process.argv.includes("--small");
// --settle: both passes claim through the function; they differ in the batch settle, sent as a
// statement or as the call of migration 0024's settle_delivered_batch.
const vs0023 = process.argv.includes("--vs0023");
const compareSettle = process.argv.includes("--settle") || vs0023;
const HOLD = 532;
const SETTLE = 130;

const store = createPostgresStore({ connectionString: DB_URL, schema, logger: benchLogger() });
await store.open();
const c = new pg.Client({ connectionString: DB_URL });
await c.connect();
const pid = (await c.query<{ p: number }>("SELECT pg_backend_pid() AS p")).rows[0]!.p;
const cpuMs = (): number => {
  const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return (Number(f[11]) + Number(f[12])) * 10;
};

// The call the store sends: claim_messages, claimSql planned once per connection.
const fnSql = claimCall(s).text;
const oldSql = fnSql.replace(".claim_messages(", ".claim_messages_0023(");
if (vs0023)
  await c.query(m0023.sql(s).replace(`FUNCTION ${s}.claim_messages(`, `FUNCTION ${s}.claim_messages_0023(`));

async function pass(fn: boolean): Promise<{ us: number; rows: number }> {
  await c.query(`TRUNCATE ${s}.messages`);
  if (vs0023)
    await c.query(
      fn
        ? `DROP INDEX IF EXISTS ${s}.messages_key_inflight`
        : `CREATE INDEX IF NOT EXISTS messages_key_inflight ON ${s}.messages (signal, key) WHERE status = 'inflight' AND key IS NOT NULL`,
    );
  // Which claim this pass sends.
  const claimText = vs0023 ? (fn ? fnSql : oldSql) : fn || compareSettle ? fnSql : claimSql(s);
  // --small: the function plans on a near-empty table (a connection's first claim in a new app),
  // then keeps that plan while the queue fills.
  if ((fn || vs0023) && small) {
    await c.query(`INSERT INTO ${s}.messages (id, signal, key, payload, created_at, updated_at)
      SELECT 'x' || g, 'bench.jobs', 'k' || g, '{}', 1, 1 FROM generate_series(1, 3) g`);
    const w = await c.query<{ id: string }>(claimText, ["bench.jobs", 1, 10, "w0", 1]);
    if (compareSettle)
      await c.query(settleDeliveredBatchCall(s).text, [
        w.rows.map((r) => r.id),
        w.rows.map(() => 1),
        2,
        "w0",
        null,
        "o",
      ]);
    await c.query(`DELETE FROM ${s}.messages`);
  }
  await c.query(
    `INSERT INTO ${s}.messages (id, signal, key, payload, created_at, updated_at)
     SELECT 'm' || lpad(g::text, 8, '0'), 'bench.jobs', 'k' || (g % 1000), jsonb_build_object('n', g), 1, 1
     FROM generate_series(0, 49999) g ORDER BY g`,
  );
  let held: Array<{ id: string; attempts: number }> = [];
  let now = 1_000;
  let rows = 0;
  const claimTo = async (): Promise<void> => {
    const r = await c.query<{ id: string; attempts: number }>(claimText, [
      "bench.jobs",
      now,
      HOLD - held.length,
      "w1",
      600_000,
    ]);
    rows += r.rows.length;
    held.push(...r.rows.map((x) => ({ id: x.id, attempts: x.attempts })));
  };
  await claimTo();
  rows = 0;
  const t0 = cpuMs();
  for (let i = 0; i < rounds; i++) {
    now += 10;
    const out = held.slice(0, SETTLE);
    held = held.slice(SETTLE);
    await c.query(
      (fn && compareSettle) || vs0023 ? settleDeliveredBatchCall(s).text : settleDeliveredSql(s),
      [out.map((x) => x.id), out.map((x) => x.attempts), now, "w1", null, "o"],
    );
    await claimTo();
  }
  return { us: ((cpuMs() - t0) * 1_000) / rows, rows };
}

if (process.argv.includes("--perf")) {
  console.log(`backend pid ${pid}`);
  await new Promise((r) => setTimeout(r, 3_000));
}
for (let p = 0; p < passes; p++) {
  for (const fn of p % 2 === 0 ? [false, true] : [true, false]) {
    const r = await pass(fn);
    console.log(
      `pass ${p + 1} ${vs0023 ? (fn ? "claim 0026" : "claim 0023") : `${fn ? "function " : "statement"}${compareSettle ? " settle" : " claim"}`}: ${r.us.toFixed(1)} µs of backend CPU per message claimed and settled (${r.rows} rows)`,
    );
  }
}
await c.query(`DROP SCHEMA ${s} CASCADE`);
await c.end();
await store.close();
