// A process booting against a database at its connection limit waits through refusals after open() too (53300), and serves once connections free up.
import { fileURLToPath } from "node:url";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TEST_DATABASE_URL } from "../conformance/drivers.ts";
import { freePort } from "../support/free-port.ts";
import { createPostgresStore } from "../../src/store/postgres/postgres-store.ts";
import { Child, type ChildEvent } from "./spawn.ts";

const CHILD = fileURLToPath(new URL("./boot-connection-limit-child.ts", import.meta.url));
const tag = `${process.pid}_${Date.now().toString(36)}`;
const DB = `oke_connlimit_${tag}`;
// Not a superuser: PostgreSQL's CONNECTION LIMIT does not apply to superusers.
const ROLE = `oke_connlimit_${tag}`;
const SCHEMA = "limited";
const admin = TEST_DATABASE_URL;
const asRole = (() => {
  const u = new URL(TEST_DATABASE_URL);
  u.username = ROLE;
  u.password = "";
  u.pathname = `/${DB}`;
  return u.toString();
})();
/** What the database lets the role hold at first: the test holds all of it, so the instance's open() is refused. */
const LIMIT = 4;

let child: Child | undefined;
const held: pg.Client[] = [];

async function sql<R extends pg.QueryResultRow>(text: string, values: unknown[] = []): Promise<R[]> {
  const c = new pg.Client({ connectionString: admin });
  await c.connect();
  try {
    return (await c.query<R>(text, values)).rows;
  } finally {
    await c.end();
  }
}

async function release(n: number): Promise<void> {
  for (const c of held.splice(held.length - n, n)) await c.end();
}

async function poll(check: () => Promise<boolean>, what: string, limitMs = 15_000): Promise<void> {
  const end = Date.now() + limitMs;
  while (!(await check())) {
    if (child?.dead)
      throw new Error(`the child exited while waiting for ${what}: ${child.stderr.slice(-2000)}`);
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const warned = (step: string | undefined, code: string) => (e: ChildEvent) =>
  e.level === 40 &&
  e.code === code &&
  e.step === step &&
  typeof e.msg === "string" &&
  e.msg.includes(`is unavailable (${code}`);

beforeAll(async () => {
  await sql(`CREATE ROLE "${ROLE}" LOGIN`);
  await sql(`CREATE DATABASE "${DB}" OWNER "${ROLE}"`);
  // Migrated beforehand, as the role: the table the test locks below exists before the instance boots.
  const store = createPostgresStore({ connectionString: asRole, schema: SCHEMA });
  await store.open();
  await store.close();
  await sql(`ALTER DATABASE "${DB}" CONNECTION LIMIT ${LIMIT}`);
}, 30_000);

afterAll(async () => {
  if (child && !child.dead) await child.kill("SIGKILL");
  await release(held.length);
  await sql(`DROP DATABASE IF EXISTS "${DB}" WITH (FORCE)`);
  await sql(`DROP ROLE IF EXISTS "${ROLE}"`);
}, 30_000);

describe("boot at the database's connection limit", () => {
  it("waits through 53300 after open() as it does for open(), then becomes ready and serves", async () => {
    for (let i = 0; i < LIMIT; i++) {
      const c = new pg.Client({ connectionString: asRole });
      await c.connect();
      held.push(c);
    }
    // The first held connection keeps the runs table locked: the instance's first call after open()
    // that reads it (the orphan scan) waits on it with its one pooled connection, a point the test can
    // see. Not the instances table: open() itself records the instance there (OKE1335's count).
    await held[0]!.query("BEGIN");
    await held[0]!.query(`LOCK TABLE "${SCHEMA}".runs IN ACCESS EXCLUSIVE MODE`);

    const port = await freePort();
    child = new Child({ DATABASE_URL: asRole, OKE_SCHEMA: SCHEMA, OKE_PORT: String(port) }, CHILD);
    const base = `http://127.0.0.1:${port}`;

    // open() is refused: the wait open() always had.
    await child.waitFor(warned(undefined, "53300"), "open() refused at the limit");
    expect(child.dead).toBe(false);

    // Two free: open() takes them (its migration check on a pooled connection, the LISTEN one).
    await release(2);
    await child.waitFor(
      (e) => e.level === 30 && e.step === undefined && /the store at .* is reachable/.test(String(e.msg)),
      "open() through",
    );
    await poll(
      async () =>
        (
          await sql(
            `SELECT 1 FROM pg_stat_activity WHERE datname = $1 AND application_name = $2 AND wait_event_type = 'Lock'`,
            [DB, `okengine:${SCHEMA}`],
          )
        ).length === 1,
      "the orphan scan waiting on the lock",
    );
    // The limit drops to what is taken without the instance's pooled connection, which is then cut:
    // every connection the boot opens from here on is refused (53300) until the test frees some.
    await sql(`ALTER DATABASE "${DB}" CONNECTION LIMIT ${LIMIT - 1}`);
    await sql(
      `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND application_name = $2`,
      [DB, `okengine:${SCHEMA}`],
    );
    const step = "scanning for orphaned runs";
    await child.waitFor(warned(step, "53300"), "the orphan scan refused at the limit");
    const during = await fetch(`${base}/_/ready`);
    expect(during.status).toBe(503);
    expect(await during.json()).toMatchObject({ reason: "store_unavailable" });
    expect(child.dead).toBe(false);

    await sql(`ALTER DATABASE "${DB}" CONNECTION LIMIT -1`);
    await held[0]!.query("COMMIT");
    await release(held.length);
    await child.waitFor((e) => e.event === "ready", "ready");
    await child.waitFor(
      (e) => e.level === 30 && e.step === step && /is reachable \(attempt \d+\)/.test(String(e.msg)),
      "the orphan scan through",
    );
    // The store's own health, marked down by the connections cut above, turns back with its next probe
    // (backing off to 2 s), which may come a moment after the boot step got through.
    await poll(async () => (await fetch(`${base}/_/ready`)).status === 200, "/_/ready 200");
    const ping = await fetch(`${base}/ping`);
    expect(ping.status).toBe(200);
    expect(await ping.json()).toEqual({ ok: true, data: { ok: true } });
    // No boot error reached the process: nothing on stderr.
    expect(child.stderr).toBe("");

    child.proc.kill("SIGTERM");
    expect(await child.exited).toBe(0);
  }, 30_000);
});
