// Loading a project as `oke` does: which files are modules, barrels, path parameters and tsconfig paths, through the real CLI.
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { builtOke, withoutVitestEnv } from "../../test/support/built-oke.ts";
import { flow } from "../flow/flow.ts";
import { on } from "../flow/on.ts";
import { http } from "../flow/http-trigger.ts";
import { isTestFile, listModules, routeHandlerWarnings } from "./load-project.ts";
import { declaredExports } from "./source-effects.ts";

const REPO = fileURLToPath(new URL("../../", import.meta.url));
let BIN = "";
beforeAll(async () => {
  BIN = await builtOke();
});

const temps: string[] = [];
afterEach(() => {
  for (const t of temps.splice(0)) rmSync(t, { recursive: true, force: true });
});

/** A project in a temp folder with these files (paths relative to it). */
function project(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), "oke-load-"));
  temps.push(dir);
  writeFileSync(join(dir, "package.json"), JSON.stringify({ name: "p", private: true, type: "module" }));
  symlinkSync(join(REPO, "node_modules"), join(dir, "node_modules"));
  for (const [file, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, file)), { recursive: true });
    writeFileSync(join(dir, file), text);
  }
  return dir;
}

/** Runs the compiled `oke` to its end: exit code and everything it printed. */
function oke(args: string[]): Promise<{ code: number | null; out: string }> {
  const env = withoutVitestEnv(process.env);
  delete env.DATABASE_URL;
  delete env.NODE_ENV;
  const child = spawn(process.execPath, [BIN, ...args], {
    cwd: REPO,
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  child.stdout.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr.on("data", (d: Buffer) => (out += d.toString()));
  return new Promise((resolve) => child.once("close", (code) => resolve({ code, out })));
}

const GET = `import { flow, http, on } from "okengine";\nexport const list = on(http.get(), flow({ do: () => 1 }));\n`;
const POST = `import { flow, http, on } from "okengine";\nexport const create = on(http.post(), flow({ do: () => 1 }));\n`;
const BOOM = `throw new Error("a test file was loaded as an app module");\n`;

describe("a binding takes its route and name from the file that declares it", () => {
  it("a barrel (export * from) under src/flows/ changes neither", async () => {
    const dir = project({
      "src/flows/orders/create.ts": POST,
      "src/flows/orders/list.ts": GET,
      "src/flows/index.ts": `export * from "./orders/create";\nexport * from "./orders/list";\n`,
    });
    const r = await oke(["routes", dir]);
    expect(r.out).toBe(
      ["METHOD  PATH     FLOW", "GET     /orders  orders.list", "POST    /orders  orders.create", ""].join(
        "\n",
      ),
    );
    expect(r.code).toBe(0);
  });

  it("a `_` file that re-exports a binding (export { x } from) is not blamed for it (no OKE1079)", async () => {
    const dir = project({
      "src/flows/orders/_all.ts": `export { create } from "./create";\nimport { list } from "./list";\nexport { list };\n`,
      "src/flows/orders/create.ts": POST,
      "src/flows/orders/list.ts": GET,
    });
    const r = await oke(["routes", dir]);
    expect(r.out).toContain("POST    /orders  orders.create");
    expect(r.out).toContain("GET     /orders  orders.list");
    expect(r.code).toBe(0);
  });
});

describe("test files are not app modules", () => {
  it("*.node-test.ts, *.test-d.ts, *.spec.ts, *.bench.ts and __tests__/ are skipped; a flow named test.ts is not", async () => {
    const dir = project({
      "src/flows/trials/start.ts": POST,
      "src/flows/trials/start.node-test.ts": BOOM,
      "src/flows/trials/start.test-d.ts": BOOM,
      "src/flows/trials/start.spec.ts": BOOM,
      "src/flows/trials/start.bench.ts": BOOM,
      "src/flows/trials/__tests__/start.ts": BOOM,
      "src/flows/diag/test.ts": GET,
    });
    const r = await oke(["routes", dir]);
    expect(r.out).not.toContain("a test file was loaded");
    expect(r.out).toContain("GET     /diag/test     diag.list");
    expect(r.out).toContain("POST    /trials/start  trials.create");
    expect(r.code).toBe(0);
  });

  it("isTestFile: the rule, part by part", () => {
    for (const f of [
      "a.test.ts",
      "a.spec.mts",
      "a.test-d.ts",
      "a.spec-d.ts",
      "a.bench.ts",
      "a.node-test.ts",
      "a.e2e-spec.ts",
      "a.test.extra.ts",
      "x/__tests__/a.ts",
      "x\\__mocks__\\a.ts",
    ])
      expect(isTestFile(f), f).toBe(true);
    for (const f of ["test.ts", "spec.ts", "contest.ts", "a.testing.ts", "latest/get.ts", "tests/get.ts"])
      expect(isTestFile(f), f).toBe(false);
  });

  it("listModules leaves them out", () => {
    const dir = project({
      "src/flows/a.ts": GET,
      "src/flows/a.node-test.ts": BOOM,
      "src/flows/a.test-d.ts": BOOM,
      "src/flows/a.d.ts": "",
    });
    expect(listModules(dir, "flows")).toEqual(["src/flows/a.ts"]);
  });
});

describe("path parameters from the file tree", () => {
  it("a bracket name that is not an identifier fails `oke routes` with OKE1083 naming the file", async () => {
    const dir = project({ "src/flows/users/[user-id]/get.ts": GET });
    const r = await oke(["routes", dir]);
    expect(r.code).not.toBe(0);
    expect(r.out).toContain("OKE1083");
    expect(r.out).toContain("src/flows/users/[user-id]/get.ts");
    expect(r.out).toContain("[userId]");
  });

  it("a catch-all that is not last fails `oke routes` with OKE1083 naming the file", async () => {
    const dir = project({ "src/flows/files/[...path]/meta.ts": GET });
    const r = await oke(["routes", dir]);
    expect(r.code).not.toBe(0);
    expect(r.out).toContain("OKE1083");
    expect(r.out).toContain("src/flows/files/[...path]/meta.ts");
    expect(r.out).not.toContain("/files/*/meta");
  });
});

describe("tsconfig paths inherited through extends", () => {
  it("an effect read through an inherited alias is recorded in the manifest", async () => {
    const dir = project({
      "tsconfig.base.json": JSON.stringify({ compilerOptions: { paths: { "~sig/*": ["./src/signals/*"] } } }),
      "tsconfig.json": JSON.stringify({ extends: "./tsconfig.base.json", compilerOptions: { strict: true } }),
      "src/signals/email.ts": `import { signal } from "okengine";\nexport const emailTask = signal.once("tasks.email", { optional: true });\n`,
      "src/flows/ops/email-dlq.ts": `import { flow, http, on } from "okengine";\nimport { emailTask } from "~sig/email";\nexport const list = on(http.get(), flow({ do: async (_: unknown, fx) => (await fx.deadLetters(emailTask)).length }));\n`,
    });
    const r = await oke(["manifest", dir]);
    expect(r.code).toBe(0);
    const manifest = JSON.parse(r.out) as { flows: Array<{ name: string; effects: { reads: string[] } }> };
    expect(manifest.flows.find((f) => f.name === "ops.list")?.effects.reads).toEqual(["signal:tasks.email"]);
  });
});

describe("declaredExports", () => {
  it("tells the names a file declares from those it takes from another module", () => {
    const dir = project({
      "src/a.ts": [
        `import { x } from "./x";`,
        `import d from "./d";`,
        `export * from "./all";`,
        `export { y } from "./y";`,
        `export { x };`,
        `const local = 1;`,
        `export { local as renamed };`,
        `export const own = 1;`,
        `export function fn() {}`,
        `export default d;`,
      ].join("\n"),
    });
    expect([...declaredExports(join(dir, "src/a.ts"))!].sort()).toEqual(["fn", "own", "renamed"]);
  });
});

describe("a Next.js-style route file (export async function GET)", () => {
  it("gets a warning per method-named function, saying how okengine writes the route", () => {
    const warnings = routeHandlerWarnings([
      {
        path: "src/flows/greet/goodbye.ts",
        exports: { GET: async () => Response.json({ bye: true }), POST: () => 1, helper: () => 2 },
      },
      { path: "src/flows/users/[id].ts", exports: { DELETE: () => 1 } },
    ]);
    expect(warnings).toEqual([
      {
        source: "src/flows/greet/goodbye.ts#GET",
        message: expect.stringContaining(
          "src/flows/greet/goodbye.ts exports a function GET (a Next.js-style route handler), which okengine does not serve: the route answers 404.",
        ) as string,
      },
      { source: "src/flows/greet/goodbye.ts#POST", message: expect.any(String) as string },
      { source: "src/flows/users/[id].ts#DELETE", message: expect.any(String) as string },
    ]);
    expect(warnings[0]!.message).toContain("export const goodbye = on(http.get(), flow({");
    expect(warnings[1]!.message).toContain("export const goodbye = on(http.post(), flow({");
    // "[id]" is no identifier: the suggestion names the export "handler".
    expect(warnings[2]!.message).toContain("export const handler = on(http.delete(), flow({");
  });

  it("says nothing of flows, bindings, other names, or files outside src/flows/", () => {
    const GET = on(http.get(), flow({ do: () => 1 }));
    expect(
      routeHandlerWarnings([
        { path: "src/flows/a.ts", exports: { GET, get: () => 1, POST: "text", handler: () => 1 } },
        { path: "src/signals/b.ts", exports: { GET: () => 1 } },
        { exports: { GET: () => 1 } },
      ]),
    ).toEqual([]);
  });
});
