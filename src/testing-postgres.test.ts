// createTestApp on a pinned postgres journal: a schema of its own unless the config names one, dropped by stop().
import pg from "pg";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { OkeConfig } from "./app/config.ts";
import type { Logger } from "./log/logger.ts";
import { flow } from "./flow/flow.ts";
import { on } from "./flow/on.ts";
import { signal } from "./signal/signal.ts";
import { dropSchema, freshSchema, PG_URL } from "./store/postgres/test-support.ts";
import { createTestApp, type TestApp } from "./testing.ts";

const ping = signal.once("testing-pg.ping", { optional: true });
const pong = on(ping, flow("testing-pg.pong", { do: () => undefined }));

/** The line boot logs once the store is open (its migrations run), naming the schema. */
const STORE_LINE = /queues and runs in PostgreSQL, schema "([^"]+)"/;

/**
 * A logger that records the schema the app says it works in; `failOnStoreLine` makes that log call
 * throw, so boot fails right after the store opened and migrated the schema.
 */
function schemaLogger(o: { failOnStoreLine?: boolean } = {}): { logger: Logger; schema: () => string } {
  let schema: string | undefined;
  const logger = pino(
    { level: "info" },
    {
      write: (line: string): void => {
        const m = STORE_LINE.exec((JSON.parse(line) as { msg: string }).msg);
        if (m === null) return;
        schema = m[1];
        if (o.failOnStoreLine === true) throw new Error("boot fails after the store opened (test)");
      },
    },
  );
  return {
    logger,
    schema: () => {
      if (schema === undefined) throw new Error("the app logged no PostgreSQL store line");
      return schema;
    },
  };
}

const pinned: OkeConfig = { drivers: { journal: "postgres" }, database: { url: PG_URL } };
const OWN_SCHEMA = /^oke_test_[0-9a-f]{12}$/;

let client: pg.Client;
beforeAll(async () => {
  client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
});
afterAll(async () => {
  await client.end();
});

const schemaExists = async (schema: string): Promise<boolean> =>
  (await client.query("SELECT 1 FROM pg_namespace WHERE nspname = $1", [schema])).rowCount === 1;

/** Connections the store of `schema` still holds (its pool names itself okengine:<schema>). */
const storeConnections = async (schema: string): Promise<number> =>
  (
    await client.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1", [
      `okengine:${schema}`,
    ])
  ).rows[0].n as number;

/** The message createTestApp failed with; an app it returned instead is stopped, so no case leaves one running. */
async function failure(booting: Promise<TestApp>): Promise<string> {
  const outcome = await booting.then(
    async (app) => {
      await app.stop();
      return "createTestApp resolved";
    },
    (e: unknown) => (e instanceof Error ? e.message : String(e)),
  );
  return outcome;
}

describe("createTestApp on a pinned postgres journal", () => {
  it("works in a fresh schema of its own, migrated at boot and dropped by stop()", async () => {
    const log = schemaLogger();
    const app = await createTestApp({ modules: [{ pong }], config: pinned, logger: log.logger });
    let schema: string;
    try {
      schema = log.schema();
      expect(schema).toMatch(OWN_SCHEMA);
      expect(await schemaExists(schema)).toBe(true);
      // Its tables are there (the migrations ran) and the app works on them.
      await app.emit(ping);
      await app.idle();
      expect((await app.operator.stats("testing-pg.ping")).delivered).toBe(1);
    } finally {
      await app.stop();
    }
    expect(await schemaExists(schema)).toBe(false);
    expect(await storeConnections(schema)).toBe(0);
  });

  it("the env.test pin gets one too, and two apps at once get two schemas: neither sees the other's messages", async () => {
    const logA = schemaLogger();
    const logB = schemaLogger();
    const config: OkeConfig = {
      env: { test: { drivers: { journal: "postgres" }, database: { url: PG_URL } } },
    };
    // role web: no worker takes the messages, so each app's queue shows what is in its schema.
    const a = await createTestApp({ modules: [{ pong }], config, role: "web", logger: logA.logger });
    let b: TestApp | undefined;
    try {
      b = await createTestApp({ modules: [{ pong }], config, role: "web", logger: logB.logger });
      expect(logA.schema()).toMatch(OWN_SCHEMA);
      expect(logB.schema()).toMatch(OWN_SCHEMA);
      expect(logA.schema()).not.toBe(logB.schema());
      await a.emit(ping, { n: 1 });
      expect((await a.pending(ping)).map((m) => m.payload)).toEqual([{ n: 1 }]);
      expect(await b.pending(ping)).toEqual([]);
    } finally {
      await Promise.all([a.stop(), b?.stop()]);
    }
    expect(await schemaExists(logA.schema())).toBe(false);
    expect(await schemaExists(logB.schema())).toBe(false);
  });

  it("a schema the config names is used as given and kept after stop()", async () => {
    const named = freshSchema("testing_keep");
    const inEnv = freshSchema("testing_keep_env");
    try {
      for (const [schema, config] of [
        [named, { ...pinned, database: { url: PG_URL, schema: named } }],
        [inEnv, { ...pinned, env: { test: { database: { schema: inEnv } } } }],
      ] as const) {
        const log = schemaLogger();
        const app = await createTestApp({ modules: [{ pong }], config, logger: log.logger });
        try {
          expect(log.schema()).toBe(schema);
          await app.emit(ping);
          await app.idle();
        } finally {
          await app.stop();
        }
        expect(await schemaExists(schema)).toBe(true);
        const delivered = await client.query(`SELECT count(*)::int AS n FROM "${schema}".messages`);
        expect(delivered.rows[0].n).toBe(1);
      }
    } finally {
      await dropSchema(named);
      await dropSchema(inEnv);
    }
  });

  it("a boot that fails after the store migrated its schema drops it and closes the store", async () => {
    const log = schemaLogger({ failOnStoreLine: true });
    expect(await failure(createTestApp({ modules: [{ pong }], config: pinned, logger: log.logger }))).toBe(
      "boot fails after the store opened (test)",
    );
    const schema = log.schema();
    expect(schema).toMatch(OWN_SCHEMA);
    expect(await schemaExists(schema)).toBe(false);
    expect(await storeConnections(schema)).toBe(0);
  });

  it("a createTestApp that fails after boot (a schedule that is not the app's) drops its schema", async () => {
    const log = schemaLogger();
    expect(
      await failure(
        createTestApp({ modules: [{ pong }], config: pinned, schedules: ["no.such"], logger: log.logger }),
      ),
    ).toContain('"no.such" is not a schedule of this app');
    const schema = log.schema();
    expect(schema).toMatch(OWN_SCHEMA);
    expect(await schemaExists(schema)).toBe(false);
  });
});
