// An idle pool connection the server ends is logged as its error alone: never the pg.Client pg-pool hangs on it.
import pg from "pg";
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { createPostgresStore } from "./postgres-store.ts";
import { dropSchema, freshSchema, PG_URL } from "./test-support.ts";

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

describe("an idle pool connection terminated by the server", () => {
  it("logs one warn line with the error's message, code and stack, and no client (pino's own serializer)", async () => {
    const lines: string[] = [];
    // A user's logger: plain pino with its standard err serializer, which writes every field of an error.
    const logger = pino({ level: "warn" }, { write: (l: string) => void lines.push(l) });
    const schema = freshSchema("idlelog");
    const store = createPostgresStore({
      connectionString: PG_URL,
      schema,
      poolSize: 2,
      logger,
      notify: false,
    });
    cleanups.push(() => dropSchema(schema));
    cleanups.push(() => store.close());
    await store.open();
    // Run a statement so the pool holds an idle connection with prepared statements.
    await store.stats("x", Date.now()).catch(() => undefined);

    const admin = new pg.Client({ connectionString: PG_URL });
    await admin.connect();
    try {
      const killed = await admin.query<{ n: string }>(
        "SELECT count(pg_terminate_backend(pid)) AS n FROM pg_stat_activity WHERE application_name = $1",
        [`okengine:${schema}`],
      );
      expect(Number(killed.rows[0]!.n)).toBeGreaterThan(0);
    } finally {
      await admin.end();
    }
    await expect.poll(() => lines.length, { timeout: 5_000 }).toBeGreaterThan(0);

    const line = JSON.parse(lines[0]!) as { msg: string; err: Record<string, unknown> };
    expect(line.msg).toBe("okengine postgres: idle pool connection failed; it is replaced");
    expect(line.err).not.toHaveProperty("client");
    expect(line.err.message).toMatch(/terminat/i);
    expect(line.err.code).toBe("57P01"); // admin_shutdown: terminated by an administrator
    expect(typeof line.err.stack).toBe("string");
    expect(lines[0]!.length).toBeLessThan(3_000);
  });
});
