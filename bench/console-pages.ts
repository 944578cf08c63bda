// Measures Console page fetches on PostgreSQL with 1 000 000 messages and 100 000 runs (run: node --import tsx bench/console-pages.ts).
import pg from "pg";
import { createPostgresStore } from "../src/store/postgres/postgres-store.ts";

const url = process.env.DATABASE_URL_TEST ?? "postgres://postgres@127.0.0.1:5432/test";
const schema = `oke_console_bench_${process.pid}`;
const store = createPostgresStore({ connectionString: url, schema });
await store.open();
const c = new pg.Client({ connectionString: url });
await c.connect();
const s = `"${schema}"`;
const T = 1_700_000_000_000;
console.log("filling…");
await c.query(`INSERT INTO ${s}.messages (id, signal, key, payload, status, attempts, failures, created_at, updated_at)
  SELECT 'm' || g, 'sig.' || (g % 4), CASE WHEN g % 3 = 0 THEN 'k' || (g % 1000) END, jsonb_build_object('n', g),
    CASE WHEN g % 10 < 6 THEN 'delivered' WHEN g % 10 < 9 THEN 'pending' ELSE 'dead' END,
    CASE WHEN g % 10 = 9 THEN 3 ELSE 0 END,
    CASE WHEN g % 10 = 9 THEN '[{"code":"E","message":"x","at":1,"attempt":1}]'::jsonb ELSE '[]'::jsonb END,
    ${T} + g, ${T} + g + 5
  FROM generate_series(1, 1000000) g`);
await c.query(`INSERT INTO ${s}.runs (id, flow, status, input, created_at, updated_at, wake_at)
  SELECT 'r' || lpad(g::text, 7, '0'), 'flow.' || (g % 5),
    CASE WHEN g % 100 = 0 THEN 'failed' WHEN g % 10 = 1 THEN 'sleeping' ELSE 'completed' END,
    '{}'::jsonb, ${T} + g * 10, ${T} + g * 10, CASE WHEN g % 10 = 1 THEN ${T} + 10000000 END
  FROM generate_series(1, 100000) g`);
await c.query(`ANALYZE ${s}.messages; ANALYZE ${s}.runs`);

async function time(name: string, fn: () => Promise<{ next: string | null }>): Promise<void> {
  await fn();
  const xs: number[] = [];
  for (let i = 0; i < 20; i++) {
    const t0 = performance.now();
    const p: { next: string | null } = await fn();
    xs.push(performance.now() - t0);
    if (p.next === null) break;
  }
  xs.sort((a, b) => a - b);
  console.log(`${name}: median ${xs[10]!.toFixed(1)} ms, max ${xs.at(-1)!.toFixed(1)} ms (20 pages of 50)`);
}
let cur: string | null = null;
const paged = (f: (cursor: string | null) => Promise<{ next: string | null }>) => async () => {
  const p = await f(cur);
  cur = p.next;
  return p;
};
for (const status of ["pending", "dead", "delivered"] as const) {
  cur = null;
  await time(
    `messages ${status}`,
    paged((cursor) => store.pageMessages({ signal: "sig.1", status, cursor, limit: 50 })),
  );
}
for (const f of [{}, { status: "failed" as const }, { status: "sleeping" as const }, { flow: "flow.2" }]) {
  cur = null;
  await time(
    `runs ${JSON.stringify(f)}`,
    paged((cursor) => store.pageRuns({ ...f, cursor, limit: 50 })),
  );
}
const t0 = performance.now();
await store.stats("sig.1", T);
console.log(`stats(sig.1) over 250 000 rows: ${(performance.now() - t0).toFixed(1)} ms`);
const t1 = performance.now();
await store.runCounts();
console.log(`runCounts over 100 000 runs: ${(performance.now() - t1).toFixed(1)} ms`);
await store.close();
await c.query(`DROP SCHEMA ${s} CASCADE`);
await c.end();
