// A keyed plain flow killed between its emits and its answer: the retry that takes the key over runs it again, and nothing is enqueued twice (PostgreSQL and the file driver).
import Database from "better-sqlite3";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TEST_DATABASE_URL } from "../conformance/drivers.ts";
import { createPostgresStore } from "../../src/store/postgres/postgres-store.ts";
import { Child } from "./spawn.ts";

const SCRIPT = fileURLToPath(new URL("./idempotent-emit-child.ts", import.meta.url));
const KEY = "emit-key-1";
const keyed = (sku: string): RequestInit => ({
  method: "POST",
  headers: { "content-type": "application/json", "idempotency-key": KEY },
  body: JSON.stringify({ sku }),
});

/** What a driver's store holds, read from outside the (dead or live) app process. */
interface Backend {
  env: Record<string, string>;
  /** Makes the key's lock lapse, as 30 s after its holder died would. */
  lapse(): Promise<void>;
  /** Stored once messages, broadcast copies and tape entries of the route's three signals. */
  counts(): Promise<{ placed: number; seen: number; live: number }>;
}

const COUNTS = (t: (name: string) => string): string => `SELECT
  (SELECT count(*) FROM ${t("messages")} WHERE signal = 'orders.placed') AS placed,
  (SELECT count(*) FROM ${t("messages")} WHERE signal = '~broadcast:orders.seen:orders.seen.watch') AS seen,
  (SELECT count(*) FROM ${t("tape_entries")} WHERE signal = 'orders.live') AS live`;

async function takeover(backend: Backend): Promise<void> {
  const start = async (env: Record<string, string> = {}): Promise<{ child: Child; url: string }> => {
    const child = new Child({ ...backend.env, ...env }, SCRIPT);
    const e = await child.waitFor((ev) => ev.event === "listening", "listening");
    return { child, url: `http://127.0.0.1:${String(e.port)}/emit-orders` };
  };
  const a = await start({ OKE_HANG: "1" });
  // The first attempt never gets an answer: its process dies after the emits committed.
  const lost = fetch(a.url, keyed("sku-1")).catch(() => undefined);
  await a.child.waitFor((ev) => ev.event === "hanging", "hanging");
  await a.child.kill("SIGKILL");
  await lost;
  expect(await backend.counts()).toEqual({ placed: 1, seen: 1, live: 1 });

  await backend.lapse();
  const b = await start();
  try {
    const retry = await fetch(b.url, keyed("sku-1"));
    expect(retry.status).toBe(200);
    const answer = await retry.text();
    expect(JSON.parse(answer)).toMatchObject({ data: { sku: "sku-1", pid: b.child.proc.pid } });
    // The flow ran again and emitted again; every emit was refused as the duplicate it is.
    expect(await backend.counts()).toEqual({ placed: 1, seen: 1, live: 1 });
    const again = await fetch(b.url, keyed("sku-1"));
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(await again.text()).toBe(answer);
  } finally {
    await b.child.kill("SIGKILL");
  }
}

describe("a keyed plain flow taken over after its process died enqueues nothing twice", () => {
  describe("PostgreSQL", () => {
    const schema = `oke_idem_emit_${process.pid}`;
    const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
    beforeAll(async () => {
      await admin.connect();
      await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      const store = createPostgresStore({ connectionString: TEST_DATABASE_URL, schema });
      await store.open();
      await store.close();
    });
    afterAll(async () => {
      await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await admin.end();
    });

    it("its once message, broadcast copy and tape entry stay one each", async () => {
      await takeover({
        env: { DATABASE_URL: TEST_DATABASE_URL, OKE_SCHEMA: schema },
        lapse: async () => {
          await admin.query(`UPDATE "${schema}".idempotency_keys SET locked_until = 0 WHERE key = $1`, [KEY]);
        },
        counts: async () => {
          const { rows } = await admin.query<{ placed: string; seen: string; live: string }>(
            COUNTS((t) => `"${schema}".${t}`),
          );
          const r = rows[0]!;
          return { placed: Number(r.placed), seen: Number(r.seen), live: Number(r.live) };
        },
      });
    });
  });

  describe("file driver", () => {
    let dir = "";
    beforeAll(async () => {
      dir = await mkdtemp(join(tmpdir(), "oke-idem-emit-"));
    });
    afterAll(async () => {
      await rm(dir, { recursive: true, force: true });
    });
    // The app process holds the database; between processes (and read-only while one runs) the
    // test opens it too — SQLite's own locking keeps that safe.
    const withDb = <T>(fn: (db: Database.Database) => T): T => {
      const db = new Database(join(dir, "store.db"));
      try {
        return fn(db);
      } finally {
        db.close();
      }
    };

    it("its once message, broadcast copy and tape entry stay one each", async () => {
      await takeover({
        env: { OKE_FILE_DIR: dir },
        lapse: () => {
          withDb((db) => db.prepare("UPDATE idempotency_keys SET locked_until = 0 WHERE key = ?").run(KEY));
          return Promise.resolve();
        },
        counts: () =>
          Promise.resolve(
            withDb(
              (db) => db.prepare(COUNTS((t) => t)).get() as { placed: number; seen: number; live: number },
            ),
          ),
      });
    });
  });
});
