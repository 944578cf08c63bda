import pg from "pg";
const T = "/work/wt/s9-fuse/src/store/postgres";
const { openStore, freshSchema, dropSchema, PG_URL } = await import(`${T}/test-support.ts`);
const { claimDueSql } = await import(`${T}/postgres-runs.ts`);
const schema = freshSchema("s9x");
const store = await openStore(schema);
const now = Date.now();
for (let k = 0; k < 3000; k += 100) {
  await Promise.all(Array.from({ length: 100 }, async (_, j) => {
    const id = `r${k + j}`;
    await store.startRun({ id, flow: "bench.three", input: { i: 1 }, parentRunId: null, owner: "o", now, leaseMs: 30000 });
    await store.finish({ runId: id, owner: "o", now, status: "completed", output: 1 });
  }));
}
const c = new pg.Client({ connectionString: PG_URL }); await c.connect();
const sql = claimDueSql(`"${schema}"`, true);
const times: number[] = [];
for (let i = 0; i < 30; i++) {
  const id = `s${i}`;
  await store.startRun({ id, flow: "bench.sleep", input: { i: 1 }, parentRunId: null, owner: "o", now, leaseMs: 30000 });
  await store.park({ runId: id, owner: "o", now, entry: { runId: id, seq: 0, kind: "sleep", label: "nap", duration: "1ms", wakeAt: now + 1, at: now } });
  const t = performance.now();
  if (i === 29) {
    const r = await c.query("EXPLAIN (ANALYZE, BUFFERS, SUMMARY) " + sql.replace(/\$1/g, "'x'").replace(/\$2::bigint/g, String(now + 5)).replace(/\$2/g, String(now + 5)).replace(/\$3/g, "32").replace(/\$4::bigint/g, "30000").replace(/\$4/g, "30000").replace(/\$5::text\[\]/g, "ARRAY['bench.three','bench.sleep']::text[]"));
    console.log(r.rows.map((x: any) => x["QUERY PLAN"]).join("\n"));
  } else {
    await c.query(sql, ["x", now + 5, 32, 30000, ["bench.three", "bench.sleep"]]);
    times.push(performance.now() - t);
  }
}
times.sort((a, b) => a - b);
console.log("claim ms p50", times[14].toFixed(2), "min", times[0].toFixed(2));
await c.end(); await store.close(); await dropSchema(schema); process.exit(0);
