// What a boot failure prints: codes and fixes for the errors an operator meets first.
import { describe, expect, it } from "vitest";
import { OkeError } from "../errors.ts";
import { describeBootError } from "./boot-error.ts";

describe("describeBootError", () => {
  it("an OkeError prints its text, code and fix", () => {
    const e = new OkeError({ code: "OKE1091", message: "oke boot: x", fix: "do y" });
    expect(describeBootError(e)).toBe("oke boot: x\n  code: OKE1091\n  fix: do y");
  });

  it("sslmode=require against a server without SSL gets a code and a fix (pg's error has neither)", () => {
    // pg's exact error (pg/lib/connection.js) for a server answering 'N' to the SSL request.
    const text = describeBootError(new Error("The server does not support SSL connections"));
    expect(text).toContain("code: OKE1336");
    expect(text).toMatch(/^oke boot: the PostgreSQL server does not support SSL connections/);
    expect(text).toMatch(/fix: .*sslmode=require/);
  });

  it("a missing database from a store the app was handed gets OKE1337 with createdb, as from DATABASE_URL", () => {
    const e = Object.assign(new Error('database "shop" does not exist'), { code: "3D000" });
    expect(describeBootError(e)).toBe(
      'oke boot: database "shop" does not exist on the PostgreSQL server (DATABASE_URL (or database.url))\n' +
        "  code: OKE1337\n" +
        '  fix: Create it (`createdb shop`, or CREATE DATABASE "shop"), or correct the database name at the end of DATABASE_URL (or database.url) (postgres://user:password@host:5432/<database>).',
    );
  });

  it("any other error keeps its own text", () => {
    expect(describeBootError(new Error("boom"))).toBe("oke boot: boom");
  });
});
