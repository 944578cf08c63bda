// Migration 0005 on a schema that already holds runs: old rows stay, `compensating` becomes a valid status.
import pg from "pg";
import { afterAll, expect, it } from "vitest";
import { migrations } from "./migrations/index.ts";
import { migrate } from "./postgres-migrate.ts";
import { createPostgresStore } from "./postgres-store.ts";
import { TEST_DATABASE_URL } from "../../../test/conformance/drivers.ts";

const schema = `oke_m0005_${process.pid}_${Date.now().toString(36)}`;
const s = `"${schema}"`;
const pool = new pg.Pool({ connectionString: TEST_DATABASE_URL, max: 2 });
afterAll(async () => {
  await pool.query(`DROP SCHEMA IF EXISTS ${s} CASCADE`);
  await pool.end();
});

it("applies over runs written before it, and the store then compensates and finishes them", async () => {
  await migrate(
    pool,
    schema,
    s,
    migrations.filter((m) => m.id < 5),
  );
  const insert = (id: string, status: string) =>
    pool.query(
      `INSERT INTO ${s}.runs (id, flow, status, input, lease_owner, lease_expires_at, created_at, updated_at)
       VALUES ($1, 'f', $2, '{}'::jsonb, 'old', 2000, 1000, 1000)`,
      [id, status],
    );
  await insert("old-running", "running");
  await insert("old-failed", "failed");
  await expect(insert("too-early", "compensating")).rejects.toThrow(/runs_status_check/);

  expect(await migrate(pool, schema, s)).toEqual(migrations.filter((m) => m.id >= 5).map((m) => m.id));
  await expect(insert("bogus", "paused")).rejects.toThrow(/runs_status_check/);

  const store = createPostgresStore({ connectionString: TEST_DATABASE_URL, schema });
  await store.open();
  try {
    expect((await store.getRun("old-failed"))!.status).toBe("failed");
    const error = { code: "Error", message: "no stock" };
    await store.beginCompensation({ runId: "old-running", owner: "old", now: 1500, error });
    expect(await store.getRun("old-running")).toMatchObject({ status: "compensating", error });
    expect(await store.nextWakeAt()).toBe(2000);
    await store.finish({ runId: "old-running", owner: "old", now: 1600, status: "failed", error });
    expect((await store.getRun("old-running"))!.status).toBe("failed");
  } finally {
    await store.close();
  }
});
