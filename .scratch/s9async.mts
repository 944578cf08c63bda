import pg from "pg";
const T = "/work/wt/s9-fuse/src/store/postgres";
const { openStore, freshSchema, dropSchema, PG_URL } = await import(`${T}/test-support.ts`);
const { claimDueSql } = await import(`${T}/postgres-runs.ts`);
const schema = freshSchema("s9a");
const store = await openStore(schema);
const now = Date.now();
const c = new pg.Client({ connectionString: PG_URL }); await c.connect();
const base = claimDueSql(`"${schema}"`, true);
const asyncSql = base.replace("WITH due AS (", "WITH cfg AS (SELECT set_config('synchronous_commit', 'off', true) AS v), due AS (").replace(/FROM claimed c LEFT JOIN/, "FROM claimed c CROSS JOIN cfg LEFT JOIN");
const wal = async () => (await c.query("SELECT pg_current_wal_flush_lsn()::text f, pg_current_wal_insert_lsn()::text i")).rows[0];
for (const [name, sql] of [["sync", base], ["async", asyncSql], ["sync", base], ["async", asyncSql]] as const) {
  const times: number[] = [];
  for (let i = 0; i < 40; i++) {
    const id = `${name}${i}${Math.random()}`;
    await store.startRun({ id, flow: "f", input: 1, parentRunId: null, owner: "o", now, leaseMs: 30000 });
    await store.park({ runId: id, owner: "o", now, entry: { runId: id, seq: 0, kind: "sleep", label: "nap", duration: "1ms", wakeAt: now + 1, at: now } });
    const t = performance.now();
    const r = await c.query(sql, ["x", now + 5, 32, 30000, ["f"]]);
    times.push(performance.now() - t);
    if (r.rows.length !== 1) throw new Error("no claim");
    if (i === 0) console.log(name, await wal());
  }
  times.sort((a, b) => a - b);
  console.log(name, "p50", times[20].toFixed(2), "p90", times[36].toFixed(2));
}
const sc = await c.query("SHOW synchronous_commit"); console.log("session after:", sc.rows[0]);
await c.end(); await store.close(); await dropSchema(schema); process.exit(0);
