// The postgres tape LISTEN connection: a failed start is retried on its own, and readers poll until it is back.
import { randomBytes } from "node:crypto";
import { createServer } from "node:net";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTcpProxy, viaProxy } from "../../../test/process/tcp-proxy.ts";
import type { TapeRef } from "../fanout-types.ts";
import type { Store } from "../types.ts";
import type { PgContext } from "./postgres-context.ts";
import { createPostgresFanout } from "./postgres-fanout.ts";
import { dropSchema, freshSchema, openStore, PG_URL } from "./test-support.ts";

/** A logger that keeps its lines. */
function keptLogger() {
  const lines: Array<{ level: string; msg: string | undefined }> = [];
  const at =
    (level: string) =>
    (_obj: object, msg?: string): void =>
      void lines.push({ level, msg });
  const logger = { warn: at("warn"), error: at("error"), info: at("info") };
  return { logger, lines, count: (re: RegExp) => lines.filter((l) => re.test(l.msg ?? "")).length };
}

/** Waits, re-checking every 20 ms, until `check` holds; the deadline is generous (machine speed never decides). */
async function until(check: () => boolean | Promise<boolean>, what: string, ms = 20_000): Promise<void> {
  for (const deadline = Date.now() + ms; !(await check());) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** A local port nothing listens on: connecting there is refused at once. */
async function deadPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe("postgres tape notifications when LISTEN cannot start", () => {
  const schema = freshSchema("fanout");
  let pool: pg.Pool;
  let other: Store;
  beforeAll(async () => {
    // Another instance on the schema: it migrates and appends.
    other = await openStore(schema, { pollIntervalMs: 3_600_000 });
    pool = new pg.Pool({ connectionString: PG_URL, max: 2 });
  });
  afterAll(async () => {
    await pool.end();
    await other.close();
    await dropSchema(schema);
  });

  /** Open tape LISTEN connections of this schema's fanouts. */
  const listening = async (): Promise<number> =>
    (
      await pool.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1",
        [`okengine-live:${schema}`],
      )
    ).rows[0]!.n;

  const context = (): PgContext => ({
    pool,
    s: `"${schema}"`,
    channel: `okengine_${schema}`,
    notify: true,
    origin: randomBytes(8).toString("hex"),
    emit: () => undefined,
  });

  it("polls every pollIntervalMs for its readers, retries quietly, and logs the outage once", async () => {
    const url = new URL(PG_URL);
    url.port = String(await deadPort());
    const log = keptLogger();
    const fanout = createPostgresFanout(context(), {
      connectionString: url.toString(),
      schema,
      pollIntervalMs: 200,
      logger: log.logger,
    });
    const heard: Array<TapeRef | "all"> = [];
    const stop = fanout.store.subscribeTapes((t) => heard.push(t));
    try {
      // Never another subscribeTapes(): the poll alone re-reads, the retries alone restart.
      await until(() => heard.filter((t) => t === "all").length >= 3, "three poll ticks");
      expect(log.count(/LISTEN for live tapes is down/)).toBe(1);
    } finally {
      stop();
      await fanout.close();
    }
    const after = heard.length;
    await new Promise((r) => setTimeout(r, 500));
    expect(heard.length, "nothing after close").toBe(after);
  });

  it("a LISTEN that failed to start comes back by itself and hears another instance's appends", async () => {
    const target = new URL(PG_URL);
    const proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port || 5432) });
    const log = keptLogger();
    // The poll is an hour away: what arrives comes from the LISTEN connection.
    const fanout = createPostgresFanout(context(), {
      connectionString: viaProxy(PG_URL, proxy),
      schema,
      pollIntervalMs: 3_600_000,
      logger: log.logger,
    });
    const heard: Array<TapeRef | "all"> = [];
    try {
      await proxy.cut();
      const stop = fanout.store.subscribeTapes((t) => heard.push(t));
      await until(() => log.count(/LISTEN for live tapes is down/) === 1, "the failed start logged");
      await proxy.restore();
      await until(async () => (await listening()) === 1, "the tape LISTEN connection back");
      await until(() => heard.includes("all"), "every reader told to look once it is back");
      expect(log.count(/LISTEN for live tapes is back/)).toBe(1);
      await other.appendTape([{ id: "e1", signal: "feed", key: "k", payload: { n: 1 } }], Date.now());
      await until(
        () => heard.some((t) => t !== "all" && t.signal === "feed" && t.key === "k"),
        "the other instance's append heard",
      );
      expect(log.count(/LISTEN for live tapes is down/)).toBe(1);
      stop();
    } finally {
      await fanout.close();
      await proxy.close();
    }
  });
});

describe("postgres broadcast subscriber rows", () => {
  const schema = freshSchema("subrows");
  let store: Store;
  let pool: pg.Pool;
  beforeAll(async () => {
    store = await openStore(schema);
    pool = new pg.Pool({ connectionString: PG_URL, max: 1 });
  });
  afterAll(async () => {
    await pool.end();
    await store.close();
    await dropSchema(schema);
  });

  it("a heartbeat drops other instances' expired rows of the pairs it runs, so restarts leave none behind; other pairs' rows stay for the janitor", async () => {
    const T0 = 1_700_000_000_000;
    const sub = { signal: "b.x", flow: "f1" };
    const other = { signal: "b.y", flow: "f2" };
    // Thirty restarts of an instance that runs b.x/f1 (each a new id), the last one live; one gone
    // instance that ran b.y/f2 alone.
    for (let i = 0; i < 30; i++)
      await store.heartbeatSubscriptions({
        instance: `i${i}`,
        subscriptions: [sub],
        now: T0 + i * 20_000,
        expiresAt: T0 + i * 20_000 + 15_000,
      });
    await store.heartbeatSubscriptions({
      instance: "gone",
      subscriptions: [other],
      now: T0,
      expiresAt: T0 + 15_000,
    });
    const rows = async (): Promise<string[]> =>
      (
        await pool.query<{ r: string }>(
          `SELECT signal || '/' || flow || ' ' || instance AS r FROM "${schema}".broadcast_subscribers ORDER BY 1`,
        )
      ).rows.map((x) => x.r);
    expect(await rows()).toEqual(["b.x/f1 i29", "b.y/f2 gone"]);
    // The lapsed pair is still the janitor's to find (its copies must be cleared).
    expect(await store.lapsedSubscriptions(T0 + 29 * 20_000, 10)).toEqual([
      { ...other, expiredAt: T0 + 15_000 },
    ]);
    expect(await store.liveSubscriptions(T0 + 29 * 20_000)).toEqual([sub]);
  });
});
