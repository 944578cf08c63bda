// Postgres migrations: applied once under concurrent opens, in order, rolled back whole on failure.
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { migrations } from "./migrations/index.ts";
import { okengineVersion } from "../../okengine-version.ts";
import { migrate } from "./postgres-migrate.ts";
import { createPostgresStore } from "./postgres-store.ts";
import { dropSchema, freshSchema, openStore, PG_URL } from "./test-support.ts";

describe("postgres migrations", () => {
  const schemas: string[] = [];
  const pools: pg.Pool[] = [];
  const pool = (): pg.Pool => {
    const p = new pg.Pool({ connectionString: PG_URL, max: 2 });
    pools.push(p);
    return p;
  };
  afterAll(async () => {
    for (const p of pools) await p.end();
    for (const s of schemas) await dropSchema(s);
  });

  it("two stores opening one new schema at once apply each migration exactly once", async () => {
    const schema = freshSchema("mig");
    schemas.push(schema);
    const a = createPostgresStore({ connectionString: PG_URL, schema, poolSize: 2 });
    const b = createPostgresStore({ connectionString: PG_URL, schema, poolSize: 2 });
    try {
      await Promise.all([a.open(), b.open()]);
      const { rows } = await pool().query<{ id: number; name: string }>(
        `SELECT id, name FROM "${schema}".migrations ORDER BY id`,
      );
      expect(rows).toEqual(migrations.map((m) => ({ id: m.id, name: m.name })));
      // Both work on the result.
      await a.enqueue([{ id: "m1", signal: "s", key: null, payload: 1, parentRunId: null }], 1);
      expect(await b.getMessage("m1")).toMatchObject({ status: "pending", payload: 1 });
    } finally {
      await a.close();
      await b.close();
    }
  });

  it("concurrent migrate calls from separate pools: one applies, the others find nothing to do", async () => {
    const schema = freshSchema("mig");
    schemas.push(schema);
    const s = `"${schema}"`;
    const results = await Promise.all([1, 2, 3, 4].map(() => migrate(pool(), schema, s)));
    expect(results.flat().sort((a, b) => a - b)).toEqual(migrations.map((m) => m.id));
    expect(results.filter((r) => r.length > 0)).toHaveLength(1);
    expect(await migrate(pool(), schema, s)).toEqual([]);
  });

  it("a later migration is applied on the next open, earlier ones are not re-run", async () => {
    const schema = freshSchema("mig");
    schemas.push(schema);
    const s = `"${schema}"`;
    expect(await migrate(pool(), schema, s)).toEqual(migrations.map((m) => m.id));
    const next = {
      id: migrations.at(-1)!.id + 1,
      name: "test-extra",
      sql: (q: string) => `CREATE TABLE ${q}.extra (x int)`,
    };
    expect(await migrate(pool(), schema, s, [...migrations, next])).toEqual([next.id]);
    expect(await migrate(pool(), schema, s, [...migrations, next])).toEqual([]);
    // Code that knows fewer migrations than the database refuses to run against it.
    await expect(migrate(pool(), schema, s)).rejects.toMatchObject({
      code: "OKE1332",
      details: { dbVersion: next.id, codeVersion: migrations.at(-1)!.id, needs: next.id },
    });
  });

  it("older code boots on a newer schema when every migration it lacks says it runs with it (runsWith), and refuses past one that does not", async () => {
    const schema = freshSchema("mig");
    schemas.push(schema);
    const s = `"${schema}"`;
    const last = migrations.at(-1)!.id;
    await migrate(pool(), schema, s);
    // A rollback to the code before the last migration (0029 replaces a function body code at 28 calls as before).
    const older = migrations.filter((m) => m.id <= migrations.at(-1)!.runsWith!);
    expect(older.at(-1)!.id).toBeLessThan(last);
    expect(await migrate(pool(), schema, s, older)).toEqual([]);
    // One migration more that leaves the current code working, one that does not.
    const kind = { id: last + 1, name: "kind", sql: () => "SELECT 1", runsWith: last };
    const breaking = { id: last + 2, name: "breaking", sql: () => "SELECT 1" };
    await migrate(pool(), schema, s, [...migrations, kind]);
    expect(await migrate(pool(), schema, s)).toEqual([]);
    await migrate(pool(), schema, s, [...migrations, kind, breaking]);
    await expect(migrate(pool(), schema, s)).rejects.toMatchObject({
      code: "OKE1332",
      details: { dbVersion: last + 2, codeVersion: last, needs: last + 2, appliedBy: okengineVersion() },
    });
  });

  it("a migration older live code cannot run with is not applied while that code runs (OKE1335); one it runs with is", async () => {
    const schema = freshSchema("mig");
    schemas.push(schema);
    const s = `"${schema}"`;
    const last = migrations.at(-1)!.id;
    // A live instance of the current code: its heartbeat records the last migration it knows.
    const store = await openStore(schema);
    const info = {
      id: "i-live",
      version: "1.0.0",
      okengineVersion: "0.1.0",
      host: "web-1",
      pid: 4242,
      env: "prod",
      startedAt: Date.now(),
      flows: [],
      signals: [],
      console: null,
    };
    await store.heartbeat(info, Date.now());
    await store.close();
    const { rows } = await pool().query<{ info: { storeMigration?: number } }>(
      `SELECT info FROM ${s}.instances`,
    );
    expect(rows[0]!.info.storeMigration).toBe(last);

    const kind = {
      id: last + 1,
      name: "kind",
      sql: (q: string) => `CREATE TABLE ${q}.kind (x int)`,
      runsWith: last,
    };
    const breaking = {
      id: last + 2,
      name: "breaking",
      sql: (q: string) => `CREATE TABLE ${q}.breaking (x int)`,
    };
    // One it runs with goes ahead; in the same call a breaking one stops both, nothing applied.
    const err = await migrate(pool(), schema, s, [...migrations, kind, breaking]).catch((e: unknown) => e);
    expect(err).toMatchObject({
      code: "OKE1335",
      message:
        `Postgres schema ${schema}: migration ${last + 2} (breaking) leaves working only code that knows migration ${last + 2} or later, ` +
        `but a live instance runs older code: web-1 pid 4242 (okengine 0.1.0, knows ${last}). Nothing was migrated.`,
      details: {
        migration: last + 2,
        needs: last + 2,
        instances: [expect.objectContaining({ id: "i-live", knows: last })],
      },
    });
    expect((err as { fix: string }).fix).toMatch(
      /^Their code is older than this migration can run beside, so this upgrade is not a rolling deploy/,
    );
    const latest = async (): Promise<number> =>
      (await pool().query<{ id: number }>(`SELECT max(id) AS id FROM ${s}.migrations`)).rows[0]!.id;
    expect(await latest()).toBe(last);
    expect(await migrate(pool(), schema, s, [...migrations, kind])).toEqual([last + 1]);

    // An instance from before the field is taken to know the schema's latest migration.
    await pool().query(`UPDATE ${s}.instances SET info = info - 'storeMigration'`);
    await expect(migrate(pool(), schema, s, [...migrations, kind, breaking])).rejects.toMatchObject({
      code: "OKE1335",
      details: { instances: [expect.objectContaining({ knows: last + 1 })] },
    });
    // Its heartbeat lapsed (31 s ago): not live, and the migration goes ahead.
    await pool().query(`UPDATE ${s}.instances SET seen_at = $1`, [Date.now() - 31_000]);
    expect(await migrate(pool(), schema, s, [...migrations, kind, breaking])).toEqual([last + 2]);
  });

  it("an upgrade from code at 28 (before 0029) to every migration since is a rolling deploy: each of them leaves that code working", async () => {
    const schema = freshSchema("mig");
    schemas.push(schema);
    const s = `"${schema}"`;
    const at28 = migrations.filter((m) => m.id <= 28);
    await migrate(pool(), schema, s, at28);
    // A live instance of code that knows 28 (the release of 2026-12-03).
    await pool().query(
      `INSERT INTO ${s}.instances (id, info, started_at, seen_at) VALUES ('i-28', $1, $2, $2)`,
      [{ id: "i-28", host: "web-1", pid: 7, okengineVersion: "0.1.0", storeMigration: 28 }, Date.now()],
    );
    const since = migrations.filter((m) => m.id > 28).map((m) => m.id);
    expect(since.length).toBeGreaterThan(0);
    expect(await migrate(pool(), schema, s)).toEqual(since);
  });

  it("the refusal names the okengine version that applied the newest migration, recorded with each (a table made before the column gets it)", async () => {
    const schema = freshSchema("mig");
    schemas.push(schema);
    const s = `"${schema}"`;
    const before = migrations.slice(0, -1);
    await migrate(pool(), schema, s, before);
    await pool().query(`ALTER TABLE ${s}.migrations DROP COLUMN okengine`);
    expect(await migrate(pool(), schema, s)).toEqual([migrations.at(-1)!.id]);
    const { rows } = await pool().query<{ id: number; okengine: string | null }>(
      `SELECT id, okengine FROM ${s}.migrations WHERE id >= $1 ORDER BY id`,
      [before.at(-1)!.id],
    );
    expect(rows).toEqual([
      { id: before.at(-1)!.id, okengine: null },
      { id: migrations.at(-1)!.id, okengine: okengineVersion() },
    ]);
    // A newer okengine's migration, as it records it.
    const next = migrations.at(-1)!.id + 1;
    await pool().query(
      `INSERT INTO ${s}.migrations (id, name, applied_at, runs_with, okengine) VALUES ($1, 'future', 0, $1, '9.9.0')`,
      [next],
    );
    const err = await migrate(pool(), schema, s).catch((e: unknown) => e);
    expect(err).toMatchObject({
      code: "OKE1332",
      message: `Postgres schema ${schema} is at migration ${next} (applied by okengine 9.9.0) but this okengine (${okengineVersion()}) knows only ${next - 1}.`,
    });
    expect((err as { fix: string }).fix).toMatch(/^Run okengine 9\.9\.0 or later on this process/);
  });

  it("a migrations table made before runs_with gets the column on the next migrate; its rows read as needing their own id", async () => {
    const schema = freshSchema("mig");
    schemas.push(schema);
    const s = `"${schema}"`;
    const before = migrations.slice(0, -1);
    await migrate(pool(), schema, s, before);
    await pool().query(`ALTER TABLE ${s}.migrations DROP COLUMN runs_with`);
    expect(await migrate(pool(), schema, s)).toEqual([migrations.at(-1)!.id]);
    const { rows } = await pool().query<{ id: number; runs_with: number | null }>(
      `SELECT id, runs_with FROM ${s}.migrations WHERE id >= $1 ORDER BY id`,
      [before.at(-1)!.id],
    );
    expect(rows).toEqual([
      { id: before.at(-1)!.id, runs_with: null },
      { id: migrations.at(-1)!.id, runs_with: migrations.at(-1)!.runsWith ?? migrations.at(-1)!.id },
    ]);
  });

  it("a failing migration rolls back whole: nothing recorded, nothing created", async () => {
    const schema = freshSchema("mig");
    schemas.push(schema);
    const s = `"${schema}"`;
    const broken = {
      id: migrations.at(-1)!.id + 1,
      name: "broken",
      sql: (q: string) => `CREATE TABLE ${q}.half (x int); SELECT 1/0`,
    };
    await expect(migrate(pool(), schema, s, [...migrations, broken])).rejects.toThrow(/division by zero/);
    const { rows } = await pool().query(`SELECT 1 FROM pg_namespace WHERE nspname = $1`, [schema]);
    expect(rows).toHaveLength(0);
    expect(await migrate(pool(), schema, s)).toEqual(migrations.map((m) => m.id));
  });

  it("rejects schema names that cannot be embedded safely", () => {
    expect(() => createPostgresStore({ connectionString: PG_URL, schema: 'x"; DROP TABLE y; --' })).toThrow(
      expect.objectContaining({ code: "OKE1333" }),
    );
  });

  it("open is idempotent and a closed store refuses to reopen", async () => {
    const schema = freshSchema("mig");
    schemas.push(schema);
    const store = await openStore(schema);
    await store.open();
    await store.close();
    await store.close();
    await expect(store.open()).rejects.toMatchObject({ code: "OKE1331" });
  });
});
