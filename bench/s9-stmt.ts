/**
 * S9's five statements per 3-step run (start, three appends, finish) in several shapes, on ONE
 * connection with no app around them: PostgreSQL CPU per run (utime + stime of that backend, from
 * /proc) and wall time per run, the shapes taking turns round by round. Shapes: the append CTE as
 * the driver sent it before migration 0017 (with the emits' CTE), without it, with one VALUES row
 * instead of jsonb_to_recordset; each unprepared, prepared with plan_cache_mode force_custom_plan,
 * prepared with its generic plan, and as PL/pgSQL functions (what 0017 does).
 *
 *   DATABASE_URL=… [FILL=20000] [N=400] [ROUNDS=3] [ONLY=plpgsql,…] node --import tsx bench/s9-stmt.ts
 *
 * The server must be on this machine (it reads /proc/<backend pid>/stat).
 */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import type pgTypes from "pg";
import { migrate } from "../src/store/postgres/postgres-migrate.ts";
import { pgTypes as types } from "../src/store/postgres/postgres-rows.ts";

const pg = createRequire(new URL("../package.json", import.meta.url))("pg") as typeof pgTypes;
const DB_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const schema = `mb_${process.pid}`;
const s = `"${schema}"`;
const pool = new pg.Pool({ connectionString: DB_URL, max: 2 });
await migrate(pool, schema, s);
const c = new pg.Client({ connectionString: DB_URL });
await c.connect();
const pid = (await c.query<{ pid: number }>("SELECT pg_backend_pid() AS pid")).rows[0]!.pid;
const ticks = (): number => {
  const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return Number(f[11]) + Number(f[12]);
};
const fill = Number(process.env.FILL ?? "0");
if (fill > 0)
  await c.query(`INSERT INTO ${s}.runs (id, flow, status, input, lease_owner, lease_expires_at, created_at, updated_at)
    SELECT 'f' || g, 'bench.three', 'completed', '{}'::jsonb, NULL, NULL, g, g FROM generate_series(1, ${fill}) g`);

const fence = `id = $1 AND status IN ('running', 'compensating') AND lease_owner = $2`;
const entries = (p: string, where: string) => `
  INSERT INTO ${s}.journal_entries (run_id, seq, kind, name, value, error, duration, wake_at, at)
  SELECT e.run_id, e.seq, e.kind, e.name, e.value -> 'v', e.error, e.duration, e.wake_at, e.at
  FROM jsonb_to_recordset(${p}::jsonb)
    AS e(run_id text, seq integer, kind text, name text, value jsonb, error jsonb, duration text, wake_at bigint, at bigint)
  WHERE ${where}`;
const fullAppend = `
    WITH run AS (
      UPDATE ${s}.runs
      SET updated_at = $3, lease_expires_at = CASE WHEN $4::bigint IS NULL THEN lease_expires_at ELSE $3::bigint + $4::bigint END
      WHERE ${fence}
      RETURNING id),
    entries AS (${entries("$5", "EXISTS (SELECT 1 FROM run)")} RETURNING 1),
    emits AS (
  INSERT INTO ${s}.messages (id, signal, key, payload, parent_run_id, created_at, updated_at)
  SELECT u.id, u.signal, u.key, u.payload, u.parent_run_id, $11::bigint, $11::bigint
  FROM unnest($6::text[], $7::text[], $8::text[], $9::jsonb[], $10::text[])
    WITH ORDINALITY AS u(id, signal, key, payload, parent_run_id, ord)
  WHERE EXISTS (SELECT 1 FROM run)
  ORDER BY u.ord RETURNING 1),
    n AS (SELECT pg_notify($12, $13) FROM run WHERE $13::text IS NOT NULL)
    SELECT (SELECT count(*) FROM run)::int AS fenced_in, (SELECT count(*) FROM n) AS notified`;
const leanAppend = `
    WITH run AS (
      UPDATE ${s}.runs
      SET updated_at = $3, lease_expires_at = CASE WHEN $4::bigint IS NULL THEN lease_expires_at ELSE $3::bigint + $4::bigint END
      WHERE ${fence}
      RETURNING id),
    entries AS (${entries("$5", "EXISTS (SELECT 1 FROM run)")} RETURNING 1)
    SELECT (SELECT count(*) FROM run)::int AS fenced_in`;
// one entry as VALUES, no jsonb_to_recordset
const valuesAppend = `
    WITH run AS (
      UPDATE ${s}.runs
      SET updated_at = $3, lease_expires_at = CASE WHEN $4::bigint IS NULL THEN lease_expires_at ELSE $3::bigint + $4::bigint END
      WHERE ${fence}
      RETURNING id),
    entries AS (INSERT INTO ${s}.journal_entries (run_id, seq, kind, name, value, error, duration, wake_at, at)
      SELECT id, $5, $6, $7, $8::jsonb, NULL, NULL, NULL, $3 FROM run RETURNING 1)
    SELECT (SELECT count(*) FROM run)::int AS fenced_in`;
const finishSql = `UPDATE ${s}.runs
     SET status = $4, output = $5::jsonb, error = $6::jsonb, lease_owner = NULL, lease_expires_at = NULL, updated_at = $3
     WHERE ${fence}`;
const startSql = `INSERT INTO ${s}.runs (id, flow, status, input, parent_run_id, lease_owner, lease_expires_at, created_at, updated_at)
     VALUES ($1, $2, 'running', $3::jsonb, $4, $5, $6::bigint + $7::bigint, $6, $6)
     ON CONFLICT (id) DO NOTHING
     RETURNING id, flow, status, input, output, error, parent_run_id, lease_owner, lease_expires_at, wake_at, recoveries, created_at, updated_at`;
await c.query(`CREATE FUNCTION ${s}.fn_append(p_run text, p_owner text, p_now bigint, p_lease bigint, p_entries jsonb) RETURNS int
  LANGUAGE plpgsql SET enable_seqscan = off AS $f$
DECLARE n int;
BEGIN
  UPDATE ${s}.runs SET updated_at = p_now, lease_expires_at = CASE WHEN p_lease IS NULL THEN lease_expires_at ELSE p_now + p_lease END
  WHERE id = p_run AND status IN ('running', 'compensating') AND lease_owner = p_owner;
  GET DIAGNOSTICS n = ROW_COUNT;
  IF n = 0 THEN RETURN 0; END IF;
  INSERT INTO ${s}.journal_entries (run_id, seq, kind, name, value, error, duration, wake_at, at)
  SELECT e.run_id, e.seq, e.kind, e.name, e.value -> 'v', e.error, e.duration, e.wake_at, e.at
  FROM jsonb_to_recordset(p_entries)
    AS e(run_id text, seq integer, kind text, name text, value jsonb, error jsonb, duration text, wake_at bigint, at bigint);
  RETURN 1;
END $f$`);
await c.query(`CREATE FUNCTION ${s}.fn_finish(p_run text, p_owner text, p_now bigint, p_status text, p_output jsonb, p_error jsonb) RETURNS int
  LANGUAGE plpgsql SET enable_seqscan = off AS $f$
DECLARE n int;
BEGIN
  UPDATE ${s}.runs SET status = p_status, output = p_output, error = p_error, lease_owner = NULL, lease_expires_at = NULL, updated_at = p_now
  WHERE id = p_run AND status IN ('running', 'compensating') AND lease_owner = p_owner;
  GET DIAGNOSTICS n = ROW_COUNT;
  RETURN n;
END $f$`);

type V = {
  name: string;
  setup?: string;
  append: (id: string, seq: number, now: number) => pgTypes.QueryConfig;
  finish: (id: string, now: number) => pgTypes.QueryConfig;
};
const ent = (id: string, seq: number, now: number) =>
  JSON.stringify([
    {
      run_id: id,
      seq,
      kind: "step",
      name: "s" + seq,
      value: { v: seq },
      error: null,
      duration: null,
      wake_at: null,
      at: now,
    },
  ]);
const fin = (id: string, now: number) => [id, "o", now, "completed", "3", null];
const variants: V[] = [
  {
    name: "full-unprep",
    append: (id, q, n) => ({
      text: fullAppend,
      values: [id, "o", n, 30000, ent(id, q, n), [], [], [], [], [], n, "chan", null],
    }),
    finish: (id, n) => ({ text: finishSql, values: fin(id, n) }),
  },
  {
    name: "lean-unprep",
    append: (id, q, n) => ({ text: leanAppend, values: [id, "o", n, 30000, ent(id, q, n)] }),
    finish: (id, n) => ({ text: finishSql, values: fin(id, n) }),
  },
  {
    name: "values-unprep",
    append: (id, q, n) => ({
      text: valuesAppend,
      values: [id, "o", n, 30000, q, "step", "s" + q, JSON.stringify(q)],
    }),
    finish: (id, n) => ({ text: finishSql, values: fin(id, n) }),
  },
  {
    name: "lean-prep-custom",
    setup: "SET plan_cache_mode = force_custom_plan",
    append: (id, q, n) => ({ name: "la", text: leanAppend, values: [id, "o", n, 30000, ent(id, q, n)] }),
    finish: (id, n) => ({ name: "fi", text: finishSql, values: fin(id, n) }),
  },
  {
    name: "values-prep-custom",
    setup: "SET plan_cache_mode = force_custom_plan",
    append: (id, q, n) => ({
      name: "va",
      text: valuesAppend,
      values: [id, "o", n, 30000, q, "step", "s" + q, JSON.stringify(q)],
    }),
    finish: (id, n) => ({ name: "fi2", text: finishSql, values: fin(id, n) }),
  },
  {
    name: "lean-prep-auto",
    setup: "SET plan_cache_mode = auto",
    append: (id, q, n) => ({ name: "la2", text: leanAppend, values: [id, "o", n, 30000, ent(id, q, n)] }),
    finish: (id, n) => ({ name: "fi3", text: finishSql, values: fin(id, n) }),
  },
  {
    name: "plpgsql",
    setup: "SET plan_cache_mode = auto",
    append: (id, q, n) => ({
      name: "fa",
      text: `SELECT ${s}.fn_append($1, $2, $3, $4, $5::jsonb) AS ok`,
      values: [id, "o", n, 30000, ent(id, q, n)],
    }),
    finish: (id, n) => ({
      name: "ff",
      text: `SELECT ${s}.fn_finish($1, $2, $3, $4, $5::jsonb, $6::jsonb) AS ok`,
      values: fin(id, n),
    }),
  },
];
const only = process.env.ONLY?.split(",");
const N = Number(process.env.N ?? "400");
const rounds = Number(process.env.ROUNDS ?? "3");
let k = 0;
const res = new Map<string, { cpu: number[]; lat: number[] }>();
for (let r = 0; r < rounds; r++)
  for (const v of variants) {
    if (only && !only.includes(v.name)) continue;
    if (v.setup) await c.query(v.setup);
    const t0 = ticks();
    const w0 = performance.now();
    for (let i = 0; i < N; i++) {
      const id = `r${k++}`;
      const now = Date.now();
      await c.query({
        name: "st",
        text: startSql,
        values: [id, "bench.three", "{}", null, "o", now, 30000],
        types,
      } as pgTypes.QueryConfig);
      for (let q = 0; q < 3; q++) await c.query({ ...v.append(id, q, now), types } as pgTypes.QueryConfig);
      await c.query({ ...v.finish(id, now), types } as pgTypes.QueryConfig);
    }
    const e = res.get(v.name) ?? { cpu: [], lat: [] };
    e.cpu.push(((ticks() - t0) * 10) / N);
    e.lat.push((performance.now() - w0) / N);
    res.set(v.name, e);
  }
for (const [n, e] of res)
  console.log(
    `${n.padEnd(20)} PG CPU ms/run ${e.cpu.map((x) => x.toFixed(2)).join(" / ")}   wall ms/run ${e.lat.map((x) => x.toFixed(2)).join(" / ")}`,
  );
const chk = await c.query(`SELECT count(*)::int AS n FROM ${s}.journal_entries`);
console.log("entries", chk.rows[0]);
await c.query(`DROP SCHEMA ${s} CASCADE`);
await c.end();
await pool.end();
