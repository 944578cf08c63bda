import pg from "pg";
const T = "/work/wt/s9-fuse/src/store/postgres";
const { openStore, freshSchema, dropSchema, PG_URL } = await import(`${T}/test-support.ts`);
const { claimDueSql, claimDueByIdSql } = await import(`${T}/postgres-runs.ts`);
const schema = freshSchema("s9c");
const store = await openStore(schema);
const now = Date.now();
const c = new pg.Client({ connectionString: PG_URL }); await c.connect();
const s = `"${schema}"`;
const base = claimDueSql(s, true);
const asyncIt = (sql: string) => sql.replace("WITH due AS (", "WITH cfg AS (SELECT set_config('synchronous_commit', 'off', true) AS v), due AS (").replace(/FROM claimed c LEFT JOIN/, "FROM claimed c CROSS JOIN cfg LEFT JOIN");
const one = claimDueByIdSql(s);
const oneAsyncX = one.replace("WITH claimed AS", "WITH cfg AS (SELECT set_config('synchronous_commit', 'off', true) AS v), claimed AS").replace("FROM claimed c LEFT JOIN", "FROM claimed c CROSS JOIN cfg LEFT JOIN");
const variants: [string, (id: string) => pg.QueryConfig][] = [
  ["batch", () => ({ text: base, values: ["x", now + 5, 32, 30000, ["f"]] })],
  ["batch-named", () => ({ name: "b1", text: base, values: ["x", now + 5, 32, 30000, ["f"]] })],
  ["upd-only", (id) => ({ text: `UPDATE ${s}.runs SET status = 'running', wake_at = NULL, lease_owner = $1, lease_expires_at = $2::bigint + $4::bigint, updated_at = $2 WHERE id = ANY($3::text[]) AND status = 'sleeping' AND wake_at <= $2 RETURNING *`, values: ["x", now + 5, [id], 30000] })],
  ["upd-agg", (id) => ({ text: `WITH c AS (UPDATE ${s}.runs SET status = 'running', wake_at = NULL, lease_owner = $1, lease_expires_at = $2::bigint + $4::bigint, updated_at = $2 WHERE id = ANY($3::text[]) AND status = 'sleeping' AND wake_at <= $2 RETURNING *) SELECT c.*, (SELECT json_agg(e ORDER BY e.seq) FROM ${s}.journal_entries e WHERE e.run_id = c.id) AS entries FROM c`, values: ["x", now + 5, [id], 30000] })],
  ["one", (id) => ({ text: one, values: ["x", now + 5, 32, 30000, [id], ["f"]] })],
];
const times: Record<string, number[]> = {};
for (let i = 0; i < 150; i++) for (const [name, mk] of variants) {
  const id = `${name}${i}${Math.random()}`;
  await store.startRun({ id, flow: "f", input: 1, parentRunId: null, owner: "o", now, leaseMs: 30000 });
  await store.park({ runId: id, owner: "o", now, entry: { runId: id, seq: 0, kind: "sleep", label: "nap", duration: "1ms", wakeAt: now + 1, at: now } });
  const t = performance.now();
  const r = await c.query(mk(id));
  (times[name] ??= []).push(performance.now() - t);
  if (r.rows.length !== 1) throw new Error("no claim " + name);
}
for (const [name, t] of Object.entries(times)) { t.sort((a, b) => a - b); console.log(name.padEnd(12), "p25", t[37]!.toFixed(2), "p50", t[75]!.toFixed(2), "p90", t[135]!.toFixed(2)); }
await c.end(); await store.close(); await dropSchema(schema); process.exit(0);
