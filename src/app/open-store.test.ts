// The store the config picks: a malformed PostgreSQL URL stops the app before any connect, and the boot line says why the file driver is used.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { afterAll, afterEach, describe, expect, it, vi } from "vitest";
import starterConfig from "../../templates/starter/oke.config.ts";
import { isOkeError } from "../errors.ts";
import { createApp, flow, http, on } from "../index.ts";
import { resolveConfig } from "./config.ts";
import { PG_URL } from "../store/postgres/test-support.ts";
import { openStore, postgresRefusal } from "./open-store.ts";

const capture = () => {
  const lines: Array<{ level: number; msg: string } & Record<string, unknown>> = [];
  const logger = pino({ level: "info" }, { write: (l: string) => void lines.push(JSON.parse(l)) });
  return { logger, lines };
};
const ping = on(http.get("/ping"), flow("ping", { do: () => ({ ok: true }) }));
const temps: string[] = [];
afterAll(() => temps.forEach((d) => rmSync(d, { recursive: true, force: true })));

describe("a DATABASE_URL that is not a PostgreSQL URL", () => {
  it("fails createApp at once with OKE1098: no connect attempt, no retry warning, no password shown", () => {
    const { logger, lines } = capture();
    let err: unknown;
    try {
      createApp({
        modules: [{ ping }],
        env: "prod",
        config: { database: { url: "app:hunter2@127.0.0.1:5432/db" } },
        logger,
      });
    } catch (e) {
      err = e;
    }
    expect(isOkeError(err) && err.code).toBe("OKE1098");
    expect((err as Error).message).toBe(
      'oke boot: database.url is not a PostgreSQL URL: it does not start with postgres:// ("***@127.0.0.1:5432/db")',
    );
    expect((err as { fix?: string }).fix).toContain("postgres://user:password@host:5432/db");
    // Refused before the store existed: boot's connect wait never ran, so nothing was retried.
    expect(lines.filter((l) => l.level >= 40)).toEqual([]);
  });

  it("names DATABASE_URL when the URL came from it", () => {
    const vars = { DATABASE_URL: "127.0.0.1:5432/db" };
    const config = resolveConfig(undefined, "prod", vars);
    expect(() => openStore(config, ".", pino({ level: "silent" }), vars)).toThrow(
      'oke boot: DATABASE_URL is not a PostgreSQL URL: it does not start with postgres:// ("127.0.0.1:5432/db")',
    );
  });
});

describe("a PostgreSQL server that refuses the URL (real server)", () => {
  // The test server's host and port with another database or user: PostgreSQL answers at once.
  const other = (change: (u: URL) => void): string => {
    const u = new URL(PG_URL);
    change(u);
    return u.toString();
  };
  const bootError = async (url: string): Promise<unknown> => {
    const app = createApp({
      modules: [{ ping }],
      env: "prod",
      config: { database: { url, connectTimeoutMs: 0 }, drivers: { send: "memory" } },
      logger: pino({ level: "silent" }),
    });
    const err = await app.boot().then(
      () => undefined,
      (e: unknown) => e,
    );
    await app.stop();
    return err;
  };

  it("a database that does not exist is OKE1337, with a createdb fix naming the URL's host, port, user and database", async () => {
    const u = new URL(PG_URL);
    const err = await bootError(other((x) => (x.pathname = "/audit_missing_db")));
    expect(isOkeError(err) && err.code).toBe("OKE1337");
    expect((err as Error).message).toBe(
      `oke boot: database "audit_missing_db" does not exist on the PostgreSQL server at ${u.hostname}:${u.port || "5432"} (database.url)`,
    );
    expect((err as { fix?: string }).fix).toContain(
      `createdb -h ${u.hostname}${u.port ? ` -p ${u.port}` : ""}${u.username ? ` -U ${u.username}` : ""} audit_missing_db`,
    );
    expect((err as { fix?: string }).fix).toContain("correct the database name at the end of database.url");
  });

  it("SSL asked of a server without it is OKE1336 for createApp too, naming the setting", async () => {
    const u = new URL(PG_URL);
    const err = await bootError(other((x) => x.searchParams.set("sslmode", "require")));
    expect(isOkeError(err) && err.code).toBe("OKE1336");
    expect((err as Error).message).toBe(
      `oke boot: the PostgreSQL server at ${u.hostname}:${u.port || "5432"} does not support SSL connections, but database.url asks for SSL`,
    );
    expect((err as { fix?: string }).fix).toContain("drop sslmode=require / ssl=true from database.url");
  });

  it("a role that does not exist is OKE1338, its fix a createuser; the password is never shown", async () => {
    const err = await bootError(
      other((x) => {
        x.username = "audit_no_such_role";
        x.password = "hunter2";
      }),
    );
    expect(isOkeError(err) && err.code).toBe("OKE1338");
    expect((err as Error).message).toContain('refused the login: role "audit_no_such_role" does not exist');
    expect((err as { fix?: string }).fix).toContain("createuser");
    expect(JSON.stringify([(err as Error).message, (err as { fix?: string }).fix])).not.toContain("hunter2");
  });
});

describe("postgresRefusal", () => {
  const pgError = (code: string, message: string) => Object.assign(new Error(message), { code });
  it("a wrong password is OKE1338, pointing at the user and password of the setting", () => {
    const e = postgresRefusal(
      pgError("28P01", 'password authentication failed for user "app"'),
      "postgres://app:hunter2@db.internal:6543/shop",
      "DATABASE_URL",
    );
    expect(e?.code).toBe("OKE1338");
    expect(e?.message).toBe(
      'oke boot: the PostgreSQL server at db.internal:6543 refused the login: password authentication failed for user "app" (DATABASE_URL)',
    );
    expect(e?.fix).toContain("Check the user and password in DATABASE_URL");
    expect(JSON.stringify([e?.message, e?.fix, e?.details])).not.toContain("hunter2");
  });
  it("leaves every other error alone (outages are boot's wait's, not a refusal)", () => {
    expect(
      postgresRefusal(pgError("ECONNREFUSED", "connect ECONNREFUSED"), PG_URL, "DATABASE_URL"),
    ).toBeUndefined();
    expect(
      postgresRefusal(pgError("57P03", "the database system is starting up"), PG_URL, "x"),
    ).toBeUndefined();
    expect(postgresRefusal("boom", PG_URL, "x")).toBeUndefined();
  });
});

describe("which driver dev uses", () => {
  it("the starter's oke.config.ts pins none: DATABASE_URL picks PostgreSQL in dev, as drivers.md says", () => {
    const url = "postgres://postgres@127.0.0.1:5432/test";
    expect(resolveConfig(starterConfig, "dev", { DATABASE_URL: url }).journal).toBe("postgres");
    expect(resolveConfig(starterConfig, "dev", {}).journal).toBe("file");
    expect(resolveConfig(starterConfig, "test", { DATABASE_URL: url }).journal).toBe("memory");
  });

  const unused = "(file driver; pinned by drivers.journal or OKE_JOURNAL, so DATABASE_URL is not used)";
  afterEach(() => vi.unstubAllEnvs());
  it.each([
    ["without a database URL", undefined, "(file driver; set DATABASE_URL to use PostgreSQL)"],
    ["with one, under a pin of its own", "postgres://postgres@127.0.0.1:5432/test", unused],
  ])("the file driver's boot line %s", async (_, url, says) => {
    // resolveConfig reads the process's DATABASE_URL: a developer's own must not decide the line.
    vi.stubEnv("DATABASE_URL", undefined);
    const dir = mkdtempSync(join(tmpdir(), "oke-open-store-"));
    temps.push(dir);
    const { logger, lines } = capture();
    const app = createApp({
      modules: [{ ping }],
      env: "dev",
      root: dir,
      config: { drivers: { journal: "file" }, ...(url === undefined ? {} : { database: { url } }) },
      logger,
    });
    await app.boot();
    await app.stop();
    expect(lines.map((l) => l.msg)).toContain(`okengine: queues and runs in ${join(dir, ".oke")} ${says}`);
  });
});
