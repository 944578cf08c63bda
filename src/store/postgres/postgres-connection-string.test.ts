// A connection string pg cannot use is refused before any connect (OKE1098), naming the problem and never showing a password.
import { describe, expect, it } from "vitest";
import { isOkeError } from "../../errors.ts";
import {
  checkConnectionString,
  connectionStringProblem,
  redactConnectionString,
} from "./postgres-connection-string.ts";
import { createPostgresStore } from "./postgres-store.ts";

const thrown = (f: () => unknown): unknown => {
  try {
    f();
  } catch (e) {
    return e;
  }
  throw new Error("did not throw");
};

describe("connectionStringProblem", () => {
  it.each([
    "postgres://postgres@127.0.0.1:5432/test",
    "postgresql://app:s%40cret@db.internal:6432/app?sslmode=require",
    "postgres://app:secret@/app?host=/var/run/postgresql", // empty host, as pg allows
    "postgres:///app",
    "/var/run/postgresql app", // pg's socket-directory form
    "socket:/var/run/postgresql?db=app",
    "POSTGRES://h/db",
  ])("accepts %s", (url) => {
    expect(connectionStringProblem(url)).toBeUndefined();
  });

  it.each([
    ["127.0.0.1:5432/db", "it does not start with postgres://"],
    ["localhost:5432/db", "it does not start with postgres://"],
    ["host=db dbname=app", "it does not start with postgres://"],
    ["mysql://u:p@h/db", "its scheme is mysql://, not postgres:// (or postgresql://)"],
    [" postgres://h/db", "it has spaces or a line break at its start or end"],
    ["postgres://h/db\n", "it has spaces or a line break at its start or end"],
    ["", "it is empty"],
  ])("refuses %j: %s", (url, problem) => {
    expect(connectionStringProblem(url)).toBe(problem);
  });

  it("refuses a URL whose port is not a number, or whose password holds an unencoded # or /", () => {
    for (const url of ["postgres://h:port/db", "postgres://u:pa#ss@h/db", "postgres://u:pa/ss@h/db"])
      expect(connectionStringProblem(url), url).toMatch(/^it is not a valid URL: .*percent-encoded/);
  });
});

describe("redactConnectionString", () => {
  it.each([
    ["127.0.0.1:5432/db", "127.0.0.1:5432/db"],
    ["mysql://app:hunter2@h/db", "mysql://***@h/db"],
    ["postgres://u:pa/ss@h/db", "postgres://***@h/db"],
    ["postgres://u:pa@ss@h/db", "postgres://***@h/db"],
    ["postgres://app:hunter2/db", "postgres://app:***/db"], // "@host" forgotten: not a port
    ["postgres://h:5432/db?password=hunter2&x=1", "postgres://h:5432/db?password=***&x=1"],
  ])("%s → %s", (url, shown) => {
    expect(redactConnectionString(url)).toBe(shown);
  });
});

describe("checkConnectionString", () => {
  it("throws OKE1098 naming the setting and the problem, showing the form and no password", () => {
    const e = thrown(() =>
      checkConnectionString("pgsql://app:hunter2@db:5432/app", "oke boot: DATABASE_URL"),
    );
    expect(isOkeError(e) && e.code).toBe("OKE1098");
    const err = e as Error & { fix: string };
    expect(err.message).toBe(
      'oke boot: DATABASE_URL is not a PostgreSQL URL: its scheme is pgsql://, not postgres:// (or postgresql://) ("pgsql://***@db:5432/app")',
    );
    expect(err.fix).toBe("Write it as postgres://user:password@host:5432/db.");
    expect(JSON.stringify(e)).not.toContain("hunter2");
  });

  it("createPostgresStore refuses one too, before it makes a pool or connects", () => {
    const e = thrown(() => createPostgresStore({ connectionString: "127.0.0.1:5432/db" }));
    expect(isOkeError(e) && e.code).toBe("OKE1098");
    expect((e as Error).message).toBe(
      'createPostgresStore(): connectionString is not a PostgreSQL URL: it does not start with postgres:// ("127.0.0.1:5432/db")',
    );
  });
});
