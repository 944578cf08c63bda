// The postgres driver through lost connections and a real restart of a private PostgreSQL: no crash, nothing lost.
import { execFile } from "node:child_process";
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NewMessage, Store, StoreEvent } from "../types.ts";
import type { PgLogger } from "./postgres-context.ts";
import { dropSchema, freshSchema, openStore, PG_URL } from "./test-support.ts";
import { pino } from "pino";
import { createApp } from "../../app/app.ts";
import { flow } from "../../flow/flow.ts";
import { on } from "../../flow/on.ts";
import { signal } from "../../signal/signal.ts";
import { createPostgresStore } from "./postgres-store.ts";

const run = promisify(execFile);
const T0 = 1_700_000_000_000;
const msg = (id: string, signal = "sig.r"): NewMessage => ({
  id,
  signal,
  key: null,
  payload: { id },
  parentRunId: null,
});
const nextEvent = (store: Store, match: (e: StoreEvent) => boolean): Promise<StoreEvent> =>
  new Promise((resolve) => {
    const stop = store.subscribe((e) => {
      if (match(e)) {
        stop();
        resolve(e);
      }
    });
  });
/** A logger that keeps the messages and can wait for one. */
const recordingLogger = (): PgLogger & { warnings: string[]; logged(msg: string): Promise<void> } => {
  const warnings: string[] = [];
  const waiters: { msg: string; resolve: () => void }[] = [];
  const log = (_o: object, m?: string): void => {
    warnings.push(m ?? "");
    for (const w of waiters.filter((w) => w.msg === m)) w.resolve();
  };
  return {
    warnings,
    warn: log,
    error: log,
    logged: (msg) =>
      warnings.includes(msg) ? Promise.resolve() : new Promise((resolve) => waiters.push({ msg, resolve })),
  };
};

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
      expect(logger.warnings).toContain("okengine postgres: LISTEN connection lost; reconnecting");
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

/** A throwaway cluster of our own, so the test can really restart PostgreSQL. */
function findBin(name: string): string | undefined {
  for (const dir of (process.env.PATH ?? "").split(":"))
    if (existsSync(join(dir, name))) return join(dir, name);
  if (!existsSync("/usr/lib/postgresql")) return undefined;
  for (const v of readdirSync("/usr/lib/postgresql").sort().reverse()) {
    const p = `/usr/lib/postgresql/${v}/bin/${name}`;
    if (existsSync(p)) return p;
  }
  return undefined;
}
const initdb = findBin("initdb");
const pgCtl = findBin("pg_ctl");
const isRoot = process.getuid?.() === 0;
// As root the cluster runs as the postgres account (initdb refuses root).
const canRunCluster =
  initdb !== undefined &&
  pgCtl !== undefined &&
  (!isRoot || (findBin("runuser") !== undefined && /^postgres:/m.test(readFileSync("/etc/passwd", "utf8"))));

const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const srv = createServer();
    srv.listen(0, "127.0.0.1", () => {
      const addr = srv.address();
      srv.close(() =>
        typeof addr === "object" && addr !== null ? resolve(addr.port) : reject(new Error("no port")),
      );
    });
  });

describe("postgres store survives a real PostgreSQL restart", () => {
  let dir: string;
  let port: number;
  let url: string;
  // initdb and postgres refuse to run as root: use the postgres account then.
  const asPg = (bin: string, args: string[]) =>
    isRoot ? run("runuser", ["-u", "postgres", "--", bin, ...args]) : run(bin, args);
  const ctl = (...args: string[]) =>
    asPg(pgCtl!, [
      "-D",
      join(dir, "data"),
      "-w",
      "-l",
      join(dir, "log"),
      ...args,
      "-o",
      `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off`,
    ]);

  beforeAll(async () => {
    // Never skip silently: this machine kind ships PostgreSQL's server binaries and its account.
    if (!canRunCluster)
      throw new Error("the restart tests need initdb, pg_ctl and (as root) a postgres account");
    dir = mkdtempSync(join(tmpdir(), "oke-pg-"));
    if (isRoot) chownSync(dir, Number((await run("id", ["-u", "postgres"])).stdout.trim()), 0);
    port = await freePort();
    url = `postgres://postgres@127.0.0.1:${port}/postgres`;
    await asPg(initdb, ["-D", join(dir, "data"), "-A", "trust", "-U", "postgres", "--no-sync"]);
    await ctl("start");
  }, 60_000);
  afterAll(async () => {
    await ctl("-m", "immediate", "stop").catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
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
      await ctl("-m", "fast", "restart");
      await woke;
      expect(
        await store.claim({ signal: "sig.r", worker: "w", max: 1, now: T0, leaseMs: 1000 }),
      ).toMatchObject([{ id: "b" }]);

      // Down long enough for reconnect attempts to fail, then back.
      woke = nextEvent(store, (e) => e.kind === "wake");
      await ctl("-m", "fast", "stop");
      await expect(store.getMessage("a")).rejects.toThrow();
      await logger.logged("okengine postgres: LISTEN reconnect failed");
      await ctl("start");
      await woke;
      expect(
        await store.claim({ signal: "sig.r", worker: "w", max: 5, now: T0, leaseMs: 1000 }),
      ).toMatchObject([{ id: "c" }]);
      const heard = nextEvent(store, (e) => e.kind === "enqueued" && e.signal === "sig.after");
      await other.enqueue([msg("d", "sig.after")], T0);
      await heard;
      expect(logger.warnings).toContain("okengine postgres: idle pool connection failed; it is replaced");
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
      const restarting = ctl("-m", "fast", "restart");
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
