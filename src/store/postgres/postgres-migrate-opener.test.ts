// An instance is counted by a newer version's migrate() (OKE1335) from its open, not from its first heartbeat.
import { hostname } from "node:os";
import pg from "pg";
import { pino } from "pino";
import { afterAll, afterEach, describe, expect, it, vi } from "vitest";
import { createApp, flow, http, on } from "../../index.ts";
import type { InstanceInfo } from "../console-types.ts";
import { migrations } from "./migrations/index.ts";
import { BOOTING_REFRESH_MS } from "./postgres-console.ts";
import { migrate } from "./postgres-migrate.ts";
import { createPostgresStore } from "./postgres-store.ts";
import { dropSchema, freshSchema, openStore, PG_URL } from "./test-support.ts";

const last = migrations.at(-1)!.id;
/** A future migration code at `last` cannot run with (runsWith above it). */
const breaking = {
  id: last + 1,
  name: "breaking",
  sql: (q: string) => `CREATE TABLE ${q}.breaking (x int)`,
  runsWith: last + 1,
};
const instance = { id: "i-booting", host: "web-2", pid: 5151 };
const fullInfo = (id: string, env = "prod"): InstanceInfo => ({
  id,
  version: "1.0.0",
  okengineVersion: "0.1.0",
  host: "web-2",
  pid: 5151,
  env,
  startedAt: 1_700_000_000_000,
  flows: ["f"],
  signals: [],
  console: null,
});

describe("postgres: an opening instance is counted by a newer version's migrations", () => {
  const schemas: string[] = [];
  const pools: pg.Pool[] = [];
  const pool = (url = PG_URL): pg.Pool => {
    const p = new pg.Pool({ connectionString: url, max: 2 });
    pools.push(p);
    return p;
  };
  const schemaOf = (): { schema: string; s: string } => {
    const schema = freshSchema("opener");
    schemas.push(schema);
    return { schema, s: `"${schema}"` };
  };
  const latest = async (s: string): Promise<number> =>
    (await pool().query<{ id: number }>(`SELECT max(id) AS id FROM ${s}.migrations`)).rows[0]!.id;
  const rowOf = async (
    s: string,
    id: string,
  ): Promise<{ info: Record<string, unknown>; started_at: string; seen_at: string } | undefined> =>
    (await pool().query(`SELECT info, started_at, seen_at FROM ${s}.instances WHERE id = $1`, [id])).rows[0];
  afterEach(() => {
    vi.useRealTimers();
  });
  afterAll(async () => {
    for (const p of pools) await p.end();
    for (const s of schemas) await dropSchema(s);
  });

  it("a store opened with its instance, before any heartbeat, stops a migration its code cannot run with (OKE1335)", async () => {
    const { schema, s } = schemaOf();
    const store = createPostgresStore({ connectionString: PG_URL, schema, poolSize: 2 });
    await store.open({ instance });
    try {
      // The audit's race: the newer version migrates between this open and its first heartbeat.
      const err = await migrate(pool(), schema, s, [...migrations, breaking]).catch((e: unknown) => e);
      expect(err).toMatchObject({
        code: "OKE1335",
        message: expect.stringContaining(
          `a live instance runs older code: web-2 pid 5151 (okengine`,
        ) as unknown,
        details: {
          migration: last + 1,
          needs: last + 1,
          instances: [
            { id: "i-booting", host: "web-2", pid: 5151, knows: last, okengine: expect.any(String) },
          ],
        },
      });
      expect(await latest(s)).toBe(last);
      // Not an instance of the fleet yet (the Console, the environment check): from its first heartbeat on.
      expect(await store.listInstances(0)).toEqual([]);
      // The first heartbeat replaces the row with the full info.
      await store.heartbeat(fullInfo("i-booting"), Date.now());
      const row = await rowOf(s, "i-booting");
      expect(row?.info).toEqual({ ...fullInfo("i-booting"), storeMigration: last });
      expect(Number(row?.started_at)).toBe(fullInfo("i-booting").startedAt);
      expect(await store.listInstances(0)).toMatchObject([{ id: "i-booting", env: "prod" }]);
      await expect(migrate(pool(), schema, s, [...migrations, breaking])).rejects.toMatchObject({
        code: "OKE1335",
      });
      // Once it stops cleanly the migration goes ahead.
      await store.removeInstance("i-booting");
      expect(await migrate(pool(), schema, s, [...migrations, breaking])).toEqual([last + 1]);
    } finally {
      await store.close();
    }
    // The other order: a migration committed before an open makes it refuse (OKE1332), recording nothing.
    const late = createPostgresStore({ connectionString: PG_URL, schema, poolSize: 2 });
    try {
      await expect(late.open({ instance: { ...instance, id: "i-late" } })).rejects.toMatchObject({
        code: "OKE1332",
      });
      expect(await rowOf(s, "i-late")).toBeUndefined();
    } finally {
      await late.close();
    }
  });

  it("a migrator queued on the lock behind an opener sees it, even on a role whose default isolation is REPEATABLE READ", async () => {
    const { schema, s } = schemaOf();
    await migrate(pool(), schema, s);
    const rr = `${PG_URL}?options=${encodeURIComponent("-c default_transaction_isolation=repeatable\\ read")}`;
    // Someone holds the migration lock; the opener queues on it, then the newer version's migrate().
    const holder = new pg.Client({ connectionString: PG_URL });
    await holder.connect();
    const waiting = async (n: number): Promise<void> => {
      for (;;) {
        const { rows } = await holder.query<{ n: number }>(
          "SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted",
        );
        if (rows[0]!.n >= n) return;
        await new Promise((r) => setTimeout(r, 10));
      }
    };
    const store = createPostgresStore({ connectionString: rr, schema, poolSize: 2 });
    try {
      await holder.query("BEGIN");
      await holder.query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", [
        `okengine:migrate:${schema}`,
      ]);
      const opened = store.open({ instance });
      await waiting(1);
      const migrated = migrate(pool(rr), schema, s, [...migrations, breaking]).catch((e: unknown) => e);
      await waiting(2);
      await holder.query("COMMIT");
      await opened;
      expect(await migrated).toMatchObject({
        code: "OKE1335",
        details: { instances: [{ id: "i-booting" }] },
      });
      expect(await latest(s)).toBe(last);
    } finally {
      await holder.end();
      await store.close();
    }
  });

  it("the opener's row is kept live until its first heartbeat; stale ones from boots that never beat are deleted", async () => {
    const { schema, s } = schemaOf();
    await migrate(pool(), schema, s);
    // A boot that failed after its open, long ago: its row is not live, and the next open deletes it.
    await pool().query(
      `INSERT INTO ${s}.instances (id, info, started_at, seen_at) VALUES ('i-failed', $1, 0, 0)`,
      [
        {
          id: "i-failed",
          host: "web-3",
          pid: 1,
          okengineVersion: "0.1.0",
          storeMigration: last,
          booting: true,
        },
      ],
    );
    // A dead instance that did heartbeat is left as it was (removeInstance's and the Console's business).
    await pool().query(
      `INSERT INTO ${s}.instances (id, info, started_at, seen_at) VALUES ('i-old', $1, 0, 0)`,
      [fullInfo("i-old")],
    );
    vi.useFakeTimers({ toFake: ["setInterval", "clearInterval"] });
    const store = createPostgresStore({ connectionString: PG_URL, schema, poolSize: 2 });
    try {
      await store.open({ instance });
      expect(await rowOf(s, "i-failed")).toBeUndefined();
      expect(await rowOf(s, "i-old")).toBeDefined();
      // Its boot takes longer than the live window: the row would have lapsed.
      const age = async (): Promise<number> =>
        (
          await pool().query<{ age: number }>(
            `SELECT ((extract(epoch FROM clock_timestamp()) * 1000)::bigint - seen_at)::int AS age
             FROM ${s}.instances WHERE id = 'i-booting'`,
          )
        ).rows[0]!.age;
      await pool().query(`UPDATE ${s}.instances SET seen_at = seen_at - 60000 WHERE id = 'i-booting'`);
      expect(await age()).toBeGreaterThanOrEqual(60_000);
      await vi.advanceTimersByTimeAsync(BOOTING_REFRESH_MS);
      await vi.waitFor(async () => expect(await age()).toBeLessThan(60_000), {
        timeout: 4_000,
        interval: 10,
      });
      await expect(migrate(pool(), schema, s, [...migrations, breaking])).rejects.toMatchObject({
        code: "OKE1335",
      });
      // After its first heartbeat the heartbeat keeps it live; the refresh no longer touches it.
      await store.heartbeat(fullInfo("i-booting"), 1_000);
      await vi.advanceTimersByTimeAsync(BOOTING_REFRESH_MS * 3);
      expect(Number((await rowOf(s, "i-booting"))?.seen_at)).toBe(1_000);
      expect(vi.getTimerCount()).toBe(0);
    } finally {
      await store.close();
    }
  });

  it("a heartbeat on a schema migrated past what its code runs with logs an error, once per migration", async () => {
    const { schema, s } = schemaOf();
    const errors: Array<{ obj: object; msg?: string }> = [];
    const logger = {
      warn: () => undefined,
      error: (obj: object, msg?: string) => errors.push({ obj, msg }),
    };
    const store = await openStore(schema, { logger });
    try {
      await store.heartbeat(fullInfo("i-1"), Date.now());
      // A migration that leaves this code working is no trouble.
      await pool().query(
        `INSERT INTO ${s}.migrations (id, name, applied_at, runs_with, okengine) VALUES ($1, 'kind', 0, $2, '9.9.0')`,
        [last + 1, last],
      );
      await store.heartbeat(fullInfo("i-1"), Date.now());
      expect(errors).toEqual([]);
      // One applied by hand (or by a newer version that did not see this instance) that does not.
      await pool().query(
        `INSERT INTO ${s}.migrations (id, name, applied_at, runs_with, okengine) VALUES ($1, 'breaking', 0, $1, '9.9.0')`,
        [last + 2],
      );
      await store.heartbeat(fullInfo("i-1"), Date.now());
      await store.heartbeat(fullInfo("i-1"), Date.now());
      expect(errors).toEqual([
        {
          obj: { schema: s, dbVersion: last + 2, codeVersion: last, needs: last + 2, instance: "i-1" },
          msg: expect.stringContaining(
            `is at migration ${last + 2}, which leaves working only code that knows migration ${last + 2} or later, but this instance's code knows only ${last}`,
          ) as unknown,
        },
      ]);
    } finally {
      await store.close();
    }
  });

  it("an app tells its store who opens it: a boot that fails after the open leaves its instance recorded", async () => {
    const { schema, s } = schemaOf();
    // A live prod instance on the store: a dev instance refuses to join it (OKE1084), after its open.
    const prod = await openStore(schema);
    await prod.heartbeat({ ...fullInfo("i-prod"), host: "prod-1", pid: 1 }, Date.now());
    await prod.close();
    const app = createApp({
      modules: [{ ping: on(http.get("/ping"), flow("ping", { do: () => ({ ok: true }) })) }],
      env: "dev",
      logger: pino({ level: "silent" }),
      config: {
        drivers: { journal: "postgres", send: "memory" },
        database: { url: PG_URL, schema },
        console: { port: false },
        http: { port: 0 },
      },
    });
    try {
      await expect(app.boot()).rejects.toMatchObject({ code: "OKE1084" });
      const { rows } = await pool().query<{ id: string; info: Record<string, unknown> }>(
        `SELECT id, info FROM ${s}.instances WHERE info ? 'booting'`,
      );
      expect(rows).toEqual([
        {
          id: expect.stringMatching(new RegExp(`^${hostname()}:${process.pid}:`)) as unknown,
          info: expect.objectContaining({
            host: hostname(),
            pid: process.pid,
            storeMigration: last,
          }) as unknown,
        },
      ]);
      expect(rows[0]!.info.id).toBe(rows[0]!.id);
    } finally {
      await app.stop();
    }
  });
});
