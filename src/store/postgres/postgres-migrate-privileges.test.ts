// Postgres migrations under limited roles: no DDL when nothing is pending, OKE1334 when a step is not allowed, no statement_timeout.
import { randomBytes } from "node:crypto";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { migrations } from "./migrations/index.ts";
import { migrate } from "./postgres-migrate.ts";
import { createPostgresStore } from "./postgres-store.ts";
import { dropSchema, freshSchema, PG_URL } from "./test-support.ts";

/** PG_URL with another user (the test cluster trusts local connections) and extra query parameters. */
const urlAs = (user: string | undefined, params: Record<string, string> = {}): string => {
  const u = new URL(PG_URL);
  if (user !== undefined) {
    u.username = user;
    u.password = "";
  }
  for (const [k, v] of Object.entries(params)) u.searchParams.set(k, v);
  return u.toString();
};

describe("postgres migrations and the privileges of the role", () => {
  // Roles are cluster-wide: a name no other run uses, dropped at the end.
  const owner = `oke_t_owner_${randomBytes(4).toString("hex")}`;
  const dml = `oke_t_dml_${randomBytes(4).toString("hex")}`;
  const schemas: string[] = [];
  const pools: pg.Pool[] = [];
  const admin = new pg.Pool({ connectionString: PG_URL, max: 1 });
  const poolAs = (url: string): pg.Pool => {
    const p = new pg.Pool({ connectionString: url, max: 1 });
    pools.push(p);
    return p;
  };
  const schema = (tag: string): string => {
    const name = freshSchema(tag);
    schemas.push(name);
    return name;
  };

  beforeAll(async () => {
    await admin.query(`CREATE ROLE ${owner} LOGIN`);
    await admin.query(`CREATE ROLE ${dml} LOGIN`);
  });
  afterAll(async () => {
    for (const p of pools) await p.end();
    for (const s of schemas) await dropSchema(s);
    for (const r of [owner, dml]) {
      await admin.query(`DROP OWNED BY ${r} CASCADE`);
      await admin.query(`DROP ROLE ${r}`);
    }
    await admin.end();
  });

  it("a role that owns its schema but may not create schemas boots and migrates it", async () => {
    const name = schema("own");
    await admin.query(`CREATE SCHEMA "${name}" AUTHORIZATION ${owner}`);
    const store = createPostgresStore({ connectionString: urlAs(owner), schema: name, poolSize: 2 });
    try {
      await store.open();
      await store.enqueue([{ id: "m1", signal: "s", key: null, payload: 1, parentRunId: null }], 1);
      expect(await store.getMessage("m1")).toMatchObject({ status: "pending" });
    } finally {
      await store.close();
    }
    const { rows } = await admin.query(`SELECT id FROM "${name}".migrations`);
    expect(rows).toHaveLength(migrations.length);
  });

  it("migrate as admin, run as a role with DML rights only: no DDL needed when nothing is pending", async () => {
    const name = schema("dml");
    expect(await migrate(admin, name, `"${name}"`)).toEqual(migrations.map((m) => m.id));
    await admin.query(`GRANT USAGE ON SCHEMA "${name}" TO ${dml}`);
    await admin.query(`GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "${name}" TO ${dml}`);
    await admin.query(`GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA "${name}" TO ${dml}`);
    const store = createPostgresStore({ connectionString: urlAs(dml), schema: name, poolSize: 2 });
    try {
      await store.open();
      await store.enqueue([{ id: "m1", signal: "s", key: null, payload: 1, parentRunId: null }], 1);
      const claimed = await store.claim({ signal: "s", worker: "w", max: 1, now: 2, leaseMs: 30_000 });
      expect(claimed.map((m) => m.id)).toEqual(["m1"]);
    } finally {
      await store.close();
    }
  });

  it("a pending migration the role may not apply fails at once with OKE1334 naming the step, role and privilege", async () => {
    const name = schema("dmlnext");
    await migrate(admin, name, `"${name}"`);
    await admin.query(`GRANT USAGE ON SCHEMA "${name}" TO ${dml}`);
    await admin.query(`GRANT SELECT, INSERT ON "${name}".migrations TO ${dml}`);
    // As an app's role has: it heartbeats there (and a migration reads it for live older code).
    await admin.query(`GRANT SELECT ON "${name}".instances TO ${dml}`);
    const next = {
      id: migrations.at(-1)!.id + 1,
      name: "extra",
      sql: (q: string) => `CREATE TABLE ${q}.extra (x int)`,
    };
    const err: unknown = await migrate(poolAs(urlAs(dml)), name, `"${name}"`, [...migrations, next]).catch(
      (e: unknown) => e,
    );
    expect(err).toMatchObject({
      code: "OKE1334",
      details: { role: dml, step: `apply migration ${next.id} (extra)`, sqlstate: "42501" },
    });
    expect((err as Error).message).toContain(
      `Postgres role "${dml}" may not apply migration ${next.id} (extra)`,
    );
    expect((err as { fix: string }).fix).toContain(`CREATE on it`);
    // Nothing half-applied.
    const { rows } = await admin.query(`SELECT max(id) AS id FROM "${name}".migrations`);
    expect(rows[0]).toEqual({ id: migrations.at(-1)!.id });
  });

  it("a role that may not create the schema gets OKE1334, not retried as an outage", async () => {
    const name = schema("nocreate");
    const store = createPostgresStore({ connectionString: urlAs(dml), schema: name, poolSize: 1 });
    try {
      const err: unknown = await store.open().catch((e: unknown) => e);
      expect(err).toMatchObject({
        code: "OKE1334",
        details: { role: dml, step: `create schema ${name}`, privilege: "CREATE on the database" },
      });
      expect((err as { fix: string }).fix).toContain(`Grant CREATE on the database to "${dml}"`);
      expect(store.isUnavailable?.(err)).toBe(false);
    } finally {
      await store.close();
    }
  });

  it("a statement_timeout of the connection does not cancel okengine's own migrations", async () => {
    const name = schema("stmt");
    // A migration certain to outlast the timeout: the bound is on the migration, not the machine's speed.
    const slow = { id: migrations.at(-1)!.id + 1, name: "slow", sql: () => "SELECT pg_sleep(0.3)" };
    const limited = poolAs(urlAs(undefined, { options: "-c statement_timeout=100" }));
    expect(await migrate(limited, name, `"${name}"`, [...migrations, slow])).toContain(slow.id);
    // The limit still holds for every other statement of the session.
    await expect(limited.query("SELECT pg_sleep(0.3)")).rejects.toMatchObject({ code: "57014" });
  });
});
