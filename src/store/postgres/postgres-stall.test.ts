// PostgreSQL faults short of an outage and outages that look like statement errors: a stall on a lock is logged, a cancelled statement is no outage, a database closed to connections is one.
import pg from "pg";
import { describe, expect, it } from "vitest";
import { recordingLogger } from "../../../test/conformance/app-fixture.ts";
import { isPostgresOutage } from "./postgres-health.ts";
import { createPostgresStore } from "./postgres-store.ts";
import { dropSchema, freshSchema, newMessage, PG_URL, T0 } from "./test-support.ts";

/** A condition, never a sleep: ends as soon as it holds (the test's own timeout bounds it). */
const until = async (ok: () => boolean): Promise<void> => {
  while (!ok()) await new Promise((r) => setTimeout(r, 20));
};

describe("postgres store: stalls and cancelled statements", () => {
  it("logs an emit held by a LOCK TABLE as a stall naming the call, then its end; the emit lands", async () => {
    const schema = freshSchema("stall");
    const { logger, records } = recordingLogger();
    const store = createPostgresStore({
      connectionString: PG_URL,
      schema,
      poolSize: 2,
      stallWarnMs: 300,
      logger,
    });
    const dba = new pg.Client({ connectionString: PG_URL });
    await store.open();
    await dba.connect();
    try {
      await dba.query("BEGIN");
      await dba.query(`LOCK TABLE "${schema}".messages IN ACCESS EXCLUSIVE MODE`);
      let landed = false;
      const emit = store.enqueue([newMessage("m_1", null, "jobs")], T0).then(() => (landed = true));
      const said = (msg: RegExp) => records.some((r) => typeof r.msg === "string" && msg.test(r.msg));
      await until(() => said(/^postgres store: 1 call\(s\) unanswered/));
      const stall = records.find((r) => /^postgres store: 1 call/.test(String(r.msg)))!;
      expect(stall).toMatchObject({ level: 40, calls: "enqueue", waiting: 1 });
      expect(stall.msg).toMatch(
        /a lock another session holds, or an overloaded server\. SELECT pid, wait_event_type/,
      );
      expect(stall.msg).toContain(`application_name = 'okengine:${schema}'`);
      expect(landed).toBe(false);
      // The store is up: readiness is not touched by a stall.
      expect(store.health()).toEqual({ ok: true });
      await dba.query("COMMIT");
      await emit;
      await until(() => said(/^postgres store calls answer again; the longest waited \d+ ms$/));
      expect((await store.getMessage("m_1"))?.status).toBe("pending");
    } finally {
      await dba.query("ROLLBACK").catch(() => undefined);
      await dba.end();
      await store.close();
      await dropSchema(schema);
    }
  });

  it("counts a statement cancelled (statement_timeout, 57014) as a refused call, never as an outage", async () => {
    const c = new pg.Client({ connectionString: PG_URL });
    await c.connect();
    try {
      await c.query("SET statement_timeout = '20ms'");
      const err = await c.query("SELECT pg_sleep(1)").catch((e: unknown) => e);
      expect(err).toMatchObject({ code: "57014" });
      expect(isPostgresOutage(err)).toBe(false);
    } finally {
      await c.end();
    }
    // The rest of class 57 still is: an admin shutdown, a server starting up.
    expect(isPostgresOutage(Object.assign(new Error("terminating connection"), { code: "57P01" }))).toBe(
      true,
    );
    expect(
      isPostgresOutage(Object.assign(new Error("the database system is starting up"), { code: "57P03" })),
    ).toBe(true);
  });

  it("counts a database closed to connections (ALLOW_CONNECTIONS false, 55000) as an outage", async () => {
    const db = `oke_closed_${process.pid}_${Date.now()}`;
    const admin = new pg.Client({ connectionString: PG_URL });
    await admin.connect();
    try {
      await admin.query(`CREATE DATABASE "${db}"`);
      await admin.query(`ALTER DATABASE "${db}" ALLOW_CONNECTIONS false`);
      const url = new URL(PG_URL);
      url.pathname = `/${db}`;
      const c = new pg.Client({ connectionString: url.toString() });
      const err = await c.connect().catch((e: unknown) => e);
      await c.end().catch(() => undefined);
      expect(err).toMatchObject({
        code: "55000",
        message: expect.stringMatching(/not currently accepting connections/),
      });
      expect(isPostgresOutage(err)).toBe(true);
      // Class 55 otherwise is a statement refused, not an outage.
      expect(isPostgresOutage(Object.assign(new Error("lock not available"), { code: "55P03" }))).toBe(false);
    } finally {
      await admin.query(`DROP DATABASE IF EXISTS "${db}"`);
      await admin.end();
    }
  });
});
