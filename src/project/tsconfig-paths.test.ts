// tsconfig `paths` as oke and the vitest plugin read them, `extends` included.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { projectAliases } from "../vitest.ts";
import { readPathAliases } from "./tsconfig-paths.ts";

const temps: string[] = [];
afterEach(() => {
  for (const t of temps.splice(0)) rmSync(t, { recursive: true, force: true });
});

function tree(files: Record<string, unknown>): string {
  const dir = mkdtempSync(join(tmpdir(), "oke-tsconfig-"));
  temps.push(dir);
  for (const [file, content] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, file)), { recursive: true });
    writeFileSync(join(dir, file), typeof content === "string" ? content : JSON.stringify(content));
  }
  return dir;
}

const url = (path: string): string => pathToFileURL(path).href;

describe("readPathAliases follows extends", () => {
  it("inherits paths from a relative base, resolved from the base's folder", () => {
    const dir = tree({
      "config/tsconfig.base.json": { compilerOptions: { paths: { "~sig/*": ["../src/signals/*"] } } },
      // Comments and an extensionless extends, as tsc accepts.
      "tsconfig.json": `{\n  // the base\n  "extends": "./config/tsconfig.base",\n  "compilerOptions": { "strict": true },\n}`,
    });
    expect(readPathAliases(dir).patterns).toEqual([
      { prefix: "~sig/", suffix: "", targets: [url(join(dir, "src/signals/*"))] },
    ]);
  });

  it("takes baseUrl from the config that declares it, and paths whole from the nearest config", () => {
    const dir = tree({
      "base/a.json": { compilerOptions: { baseUrl: "..", paths: { "~a/*": ["a/*"] } } },
      "base/b.json": { compilerOptions: { paths: { "~b/*": ["b/*"], "#one": ["one.ts"] } } },
      // An array: b (later) wins over a for paths; a's baseUrl still applies.
      "tsconfig.json": { extends: ["./base/a.json", "./base/b.json"] },
    });
    const aliases = readPathAliases(dir);
    expect(aliases.exact).toEqual({ "#one": [url(join(dir, "one.ts"))] });
    expect(aliases.patterns).toEqual([{ prefix: "~b/", suffix: "", targets: [url(join(dir, "b/*"))] }]);

    const own = tree({
      "base.json": { compilerOptions: { paths: { "~x/*": ["x/*"] } } },
      "tsconfig.json": { extends: "./base.json", compilerOptions: { paths: { "~y/*": ["./y/*"] } } },
    });
    expect(readPathAliases(own).patterns.map((p) => p.prefix)).toEqual(["~y/"]);
  });

  it("resolves a package name from node_modules (a file in it, or its tsconfig.json)", () => {
    const dir = tree({
      "node_modules/@acme/tsconfig/package.json": { name: "@acme/tsconfig", version: "1.0.0" },
      "node_modules/@acme/tsconfig/tsconfig.json": { compilerOptions: { paths: { "~lib/*": ["./lib/*"] } } },
      "node_modules/@acme/tsconfig/strict.json": { compilerOptions: { paths: { "~s/*": ["./s/*"] } } },
      "tsconfig.json": { extends: "@acme/tsconfig" },
      "other/tsconfig.json": { extends: "@acme/tsconfig/strict.json" },
    });
    expect(readPathAliases(dir).patterns[0]!.targets).toEqual([
      url(join(dir, "node_modules/@acme/tsconfig/lib/*")),
    ]);
    expect(readPathAliases(join(dir, "other")).patterns[0]!.prefix).toBe("~s/");
  });

  it("says which config names a base that does not exist, or extends itself", () => {
    const missing = tree({ "tsconfig.json": { extends: "./nope.json" } });
    expect(() => readPathAliases(missing)).toThrow(`extends "./nope.json", which cannot be found`);
    const loop = tree({ "tsconfig.json": { extends: "./b.json" }, "b.json": { extends: "./tsconfig.json" } });
    expect(() => readPathAliases(loop)).toThrow("tsconfig extends itself");
  });

  it("the vitest plugin's aliases include the inherited paths", () => {
    const dir = tree({
      "tsconfig.base.json": { compilerOptions: { paths: { "~lib/*": ["./src/lib/*"] } } },
      "tsconfig.json": { extends: "./tsconfig.base.json" },
    });
    const lib = projectAliases(dir).find((a) => a.find.test("~lib/money"));
    expect(lib?.replacement).toBe(`${fileURLToPath(url(join(dir, "src/lib")))}/$1`);
  });
});
