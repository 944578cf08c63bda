// The postgres driver through lost connections and a real restart of a private PostgreSQL: no crash, nothing lost.
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NewMessage, Store, StoreEvent } from "../types.ts";
import { dropSchema, freshSchema, openStore, PG_URL } from "./test-support.ts";
import { pino } from "pino";
import { createApp } from "../../app/app.ts";
import { flow } from "../../flow/flow.ts";
import { on } from "../../flow/on.ts";
import { signal } from "../../signal/signal.ts";
import { createPostgresStore } from "./postgres-store.ts";
import { startPrivateCluster, type PrivateCluster } from "../../../test/process/private-cluster.ts";

const T0 = 1_700_000_000_000;
const msg = (id: string, signal = "sig.r"): NewMessage => ({
  id,
  signal,
  key: null,
  payload: { id },
  parentRunId: null,
});
/** Waits, re-checking every 20 ms, until `check` holds (a generous deadline: machine speed never decides). */
async function until(check: () => boolean, what: string, ms = 30_000): Promise<void> {
  for (const deadline = Date.now() + ms; !check();) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
const nextEvent = (store: Store, match: (e: StoreEvent) => boolean): Promise<StoreEvent> =>
  new Promise((resolve) => {
    const stop = store.subscribe((e) => {
      if (match(e)) {
        stop();
        resolve(e);
      }
    });
  });
/** A logger that keeps its lines and can wait for one. */
const recordingLogger = () => {
  const lines: { level: "warn" | "error" | "info"; msg: string; fields: object }[] = [];
  const waiters: { match: RegExp; resolve: () => void }[] = [];
  const at =
    (level: "warn" | "error" | "info") =>
    (fields: object, msg = ""): void => {
      lines.push({ level, msg, fields });
      for (const w of waiters.filter((w) => w.match.test(msg))) w.resolve();
    };
  return {
    lines,
    warn: at("warn"),
    error: at("error"),
    info: at("info"),
    /** How many lines at `level` match. */
    count: (level: "warn" | "info", match: RegExp) =>
      lines.filter((l) => l.level === level && match.test(l.msg)).length,
    logged: (match: RegExp): Promise<void> =>
      lines.some((l) => match.test(l.msg))
        ? Promise.resolve()
        : new Promise((resolve) => waiters.push({ match, resolve })),
  };
};
/** The LISTEN outage lines of the store's wake-up connection. */
const LISTEN_DOWN =
  /^okengine postgres: LISTEN for wake-ups is down \(.+\); polling every 3600000 ms and reconnecting until it is back$/;
const LISTEN_BACK = /^okengine postgres: LISTEN for wake-ups is back after \d+ ms \(\d+ connect attempts?\)$/;

describe("postgres store survives lost connections (shared server)", () => {
  const schema = freshSchema("lost");
  afterAll(() => dropSchema(schema));

  it("after every backend of the store is terminated: no crash, LISTEN reconnects with a synthetic wake, queries succeed", async () => {
    const logger = recordingLogger();
    const store = await openStore(schema, { pollIntervalMs: 3_600_000, logger });
    const other = await openStore(schema, { pollIntervalMs: 3_600_000 });
    const admin = new pg.Client({ connectionString: PG_URL });
    await admin.connect();
    try {
      await store.enqueue([msg("a"), msg("b")], T0);
      expect(
        await store.claim({ signal: "sig.r", worker: "w", max: 1, now: T0, leaseMs: 1000 }),
      ).toHaveLength(1);
      const woke = nextEvent(store, (e) => e.kind === "wake");
      const { rows } = await admin.query<{ n: number }>(
        `SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity WHERE application_name IN ($1, $2)`,
        [`okengine:${schema}`, `okengine-listen:${schema}`],
      );
      expect(rows[0]!.n).toBeGreaterThanOrEqual(2); // the LISTEN connection and at least one pooled one
      await woke;
      expect(logger.count("warn", LISTEN_DOWN)).toBe(1);
      await logger.logged(LISTEN_BACK);
      expect(
        await store.claim({ signal: "sig.r", worker: "w", max: 5, now: T0, leaseMs: 1000 }),
      ).toMatchObject([{ id: "b" }]);
      const heard = nextEvent(store, (e) => e.kind === "enqueued" && e.signal === "sig.after");
      await other.enqueue([msg("c", "sig.after")], T0);
      await heard;
    } finally {
      await admin.end();
      await store.close();
      await other.close();
    }
  });
});

describe("postgres store survives a real PostgreSQL restart", () => {
  // A cluster of this file's own: never the shared server.
  let cluster: PrivateCluster;
  let url: string;

  beforeAll(async () => {
    cluster = await startPrivateCluster();
    url = cluster.url;
  }, 60_000);
  afterAll(async () => {
    await cluster?.destroy();
  });

  it("restart and a stretch of downtime: no crash, a synthetic wake on reconnect, then queries and LISTEN work", async () => {
    const logger = recordingLogger();
    const opts = { connectionString: url, schema: "okengine", pollIntervalMs: 3_600_000 };
    const store = await openStore("okengine", { ...opts, logger });
    const other = await openStore("okengine", opts);
    try {
      await store.enqueue([msg("a"), msg("b"), msg("c")], T0);
      expect(
        await store.claim({ signal: "sig.r", worker: "w", max: 1, now: T0, leaseMs: 1000 }),
      ).toHaveLength(1);

      let woke = nextEvent(store, (e) => e.kind === "wake");
      await cluster.restart();
      await woke;
      expect(
        await store.claim({ signal: "sig.r", worker: "w", max: 1, now: T0, leaseMs: 1000 }),
      ).toMatchObject([{ id: "b" }]);

      // The restart was one outage: one warn, one info.
      await logger.logged(LISTEN_BACK);
      expect(logger.count("warn", LISTEN_DOWN)).toBe(1);
      expect(logger.count("info", LISTEN_BACK)).toBe(1);

      // Down long enough for reconnect attempts to fail (the first comes within 100 ms of the loss), then back.
      woke = nextEvent(store, (e) => e.kind === "wake");
      await cluster.stop();
      await expect(store.getMessage("a")).rejects.toThrow();
      await until(() => logger.count("warn", LISTEN_DOWN) === 2, "the second outage");
      await new Promise((r) => setTimeout(r, 500));
      await cluster.start();
      await woke;
      // Several failed tries, yet one warn when it went down and one info when it came back.
      await until(() => logger.count("info", LISTEN_BACK) === 2, "LISTEN back");
      expect(logger.count("warn", LISTEN_DOWN)).toBe(2);
      const back = logger.lines.filter((l) => LISTEN_BACK.test(l.msg))[1]!.fields as {
        attempts: number;
        downMs: number;
      };
      expect(back.attempts).toBeGreaterThanOrEqual(2);
      expect(back.downMs).toBeGreaterThanOrEqual(500);
      expect(
        await store.claim({ signal: "sig.r", worker: "w", max: 5, now: T0, leaseMs: 1000 }),
      ).toMatchObject([{ id: "c" }]);
      const heard = nextEvent(store, (e) => e.kind === "enqueued" && e.signal === "sig.after");
      await other.enqueue([msg("d", "sig.after")], T0);
      await heard;
      expect(logger.lines.map((l) => l.msg)).toContain(
        "okengine postgres: idle pool connection failed; it is replaced",
      );
    } finally {
      await store.close();
      await other.close();
    }
  });

  it("an app keeps working through a restart mid-run: every acknowledged emit is delivered", async () => {
    const jobs = signal.once("jobs.restart");
    const delivered = new Set<number>();
    const w = on(jobs, flow("jobs.restart", { do: ({ n }: { n: number }) => void delivered.add(n) }));
    const store = createPostgresStore({ connectionString: url, schema: "app_restart", pollIntervalMs: 200 });
    const app = createApp({
      modules: [{ w }],
      env: "prod",
      store,
      logger: pino({ level: "silent" }),
      config: { database: { url }, signals: { leaseMs: 2_000 } },
    });
    await app.boot();
    const acknowledged: number[] = [];
    const emit = async (n: number): Promise<void> => {
      try {
        await app.emit(jobs, { n });
        acknowledged.push(n);
      } catch {
        // Refused while the server is down: not acknowledged, so not owed.
      }
    };
    try {
      for (let n = 0; n < 100; n++) await emit(n);
      const restarting = cluster.restart();
      for (let n = 100; n < 200; n++) await emit(n);
      await restarting;
      for (let n = 200; n < 300; n++) await emit(n);
      const deadline = Date.now() + 30_000;
      while (!acknowledged.every((n) => delivered.has(n))) {
        if (Date.now() > deadline) {
          throw new Error(
            `${acknowledged.filter((n) => !delivered.has(n)).length} acknowledged emits never delivered`,
          );
        }
        await new Promise((r) => setTimeout(r, 100));
      }
      expect(acknowledged.length).toBeGreaterThanOrEqual(200);
      expect(acknowledged.filter((n) => !delivered.has(n))).toEqual([]);
    } finally {
      await app.stop({ timeoutMs: 2_000 });
      await store.close();
    }
  }, 60_000);
});
