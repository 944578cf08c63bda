import pg from "pg";
const c = new pg.Client({ connectionString: "postgres://postgres@127.0.0.1:5432/test" }); await c.connect();
await c.query("CREATE TABLE IF NOT EXISTS s9fuse_rtt (id int primary key, v int)"); await c.query("INSERT INTO s9fuse_rtt VALUES (1, 0) ON CONFLICT DO NOTHING");
for (const [name, sql, p] of [["select1", "SELECT $1::int", [1]], ["update", "UPDATE s9fuse_rtt SET v = v + $1 WHERE id = 1", [1]], ["async", "WITH c AS (SELECT set_config($$synchronous_commit$$, $$off$$, true)) UPDATE s9fuse_rtt SET v = v + $1 FROM c WHERE id = 1", [1]]] as const) {
  const times: number[] = [];
  for (let i = 0; i < 200; i++) { const t = performance.now(); await c.query(sql, p as unknown[]); times.push(performance.now() - t); }
  times.sort((a, b) => a - b);
  console.log(name, "p50", times[100].toFixed(3), "p10", times[20].toFixed(3), "p90", times[180].toFixed(3));
}
await c.query("DROP TABLE s9fuse_rtt"); await c.end();
