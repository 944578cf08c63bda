// The published package, as a user gets it: `npm pack`, installed from the tarball with production
// dependencies only into a temp app, then `oke routes`, `oke start`, `oke dev` and the testing helpers.
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  CREATE_PACKAGE,
  npmCacheDir,
  npmInstall,
  packRepo,
  removeNativePrebuilds,
  removeNpxInstalls,
  REPO,
  writeTree,
} from "./package/pack.ts";
import { run, runToEnd, userEnv, type Proc } from "./package/proc.ts";

// One pack (a build, ~10 s) and one install for the whole file; the create-okengine tarball (its
// prepack copies the starter in: no build) is packed alongside. Installs take better-sqlite3 (the
// file driver) prebuilt from this checkout's own compile (nativePrebuildsEnv); without one, each
// install compiles it with node-gyp (~1.5 min idle, 2–2.5 min on a loaded 2-core machine) — hence 10 min.
const SETUP_MS = 600_000;
let tarball = "";
let createTarball = "";
let app = "";
const running: Proc[] = [];

const APP_FILES = {
  "package.json": JSON.stringify({ name: "tarball-app", private: true, type: "module" }, null, 2),
  "oke.config.ts": [
    'import { defineConfig } from "okengine";',
    "",
    "// No database in this test: prod keeps its state in .oke/ too.",
    'export default defineConfig({ env: { prod: { drivers: { journal: "file" } } } });',
    "",
  ].join("\n"),
  "src/lib/words.ts": 'export const GREETING = "Hello";\n',
  "src/flows/hello.ts": [
    'import { flow, http, on } from "okengine";',
    'import { GREETING } from "@/lib/words";',
    "",
    "export const hello = on(http.get(), flow({ do: () => ({ greeting: GREETING }) }));",
    "",
  ].join("\n"),
  "test/hello.test.ts": [
    'import { test } from "node:test";',
    'import assert from "node:assert/strict";',
    'import { createTestApp } from "okengine/testing";',
    "",
    'test("hello answers", async () => {',
    '  const app = await createTestApp({ project: "." });',
    '  const res = await app.request("/hello");',
    '  assert.deepEqual(await res.json(), { ok: true, data: { greeting: "Hello" } });',
    "  await app.stop();",
    "});",
    "",
  ].join("\n"),
};

beforeAll(async () => {
  // npm's cache dir is asked beside the pack, for removeNpxInstalls later: no time of its own.
  [tarball, createTarball] = await Promise.all([packRepo(), packRepo(CREATE_PACKAGE), npmCacheDir()]);
  app = writeTree(APP_FILES);
  await npmInstall(app, ["--omit=dev", tarball]);
}, SETUP_MS);

afterAll(async () => {
  for (const p of running)
    if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill("SIGKILL");
  // npm exec's install of these tarballs, when the test that removes it failed first.
  await removeNpxInstalls([tarball, createTarball]);
  removeNativePrebuilds();
  if (app) rmSync(app, { recursive: true, force: true });
  if (tarball) rmSync(join(tarball, ".."), { recursive: true, force: true });
  if (createTarball) rmSync(join(createTarball, ".."), { recursive: true, force: true });
});

const oke = (args: string[], env: Record<string, string> = {}): Proc => {
  const p = run(join(app, "node_modules/.bin/oke"), args, { cwd: app, env: userEnv(env) });
  running.push(p);
  return p;
};
const portOf = (line: string): number => Number(/http:\/\/[^\s/]+:(\d+)/.exec(line)![1]);

describe("the tarball", () => {
  it("holds the compiled package and docs, and no sources, tests or fixtures", () => {
    const files = execFileSync("tar", ["tzf", tarball], { encoding: "utf8" }).trim().split("\n");
    expect(files).toContain("package/dist/index.js");
    expect(files).toContain("package/dist/index.d.ts");
    expect(files).toContain("package/bin/oke.js");
    // The Console's page: not compiled by tsc, copied by the build (scripts/copy-assets.js).
    for (const f of ["index.html", "console.js", "console.css"])
      expect(files).toContain(`package/dist/console/page/${f}`);
    // The starter's own tests (templates/starter) are what `oke init` copies; okengine's are not shipped.
    const own = files.filter((f) => !f.startsWith("package/templates/"));
    expect(own.filter((f) => /\.test\.|fixtures\/|^package\/src\/|test-support|test-helper/.test(f))).toEqual(
      [],
    );
    expect(files).toContain("package/templates/starter/src/flows/trials/start.test.ts");
  });

  // Two external checkers, each a fresh Node process reading the whole tarball (arethetypeswrong
  // resolves every entry point under four module modes): well inside 30 s on a quiet machine, past the
  // suite's 30 s at load 26. The bound is only for that slow step; what it asserts is unchanged.
  it("passes publint and arethetypeswrong (ESM-only profile)", { timeout: 180_000 }, async () => {
    const r = await runToEnd(process.execPath, [join(REPO, "scripts/check-package.js"), tarball], {
      cwd: REPO,
      env: userEnv(),
    });
    expect(r.output).toContain("All good!");
    expect(r.code, r.output).toBe(0);
  });

  it("create-okengine carries the starter and okengine's version, and depends on nothing", () => {
    const files = execFileSync("tar", ["tzf", createTarball], { encoding: "utf8" }).trim().split("\n");
    // Copied in by its prepack (stage.js) from templates/starter: the very files okengine ships.
    const starter = execFileSync("tar", ["tzf", tarball], { encoding: "utf8" })
      .trim()
      .split("\n")
      .filter((f) => f.startsWith("package/templates/starter/"))
      .map((f) => f.replace("package/templates/starter/", "package/template/"));
    expect(starter.length).toBeGreaterThan(10);
    expect(files.sort()).toEqual(
      [
        "package/README.md",
        "package/index.js",
        "package/okengine.json",
        "package/package.json",
        ...starter,
      ].sort(),
    );
    const packed = (f: string): string =>
      execFileSync("tar", ["xzOf", createTarball, `package/${f}`], { encoding: "utf8" });
    const own = JSON.parse(readFileSync(join(REPO, "package.json"), "utf8")) as { version: string };
    const create = JSON.parse(packed("package.json")) as Record<string, unknown>;
    // Released in lockstep: `npm create okengine@x` writes okengine x's starter, and installs nothing else.
    expect(create.version).toBe(own.version);
    expect(JSON.parse(packed("okengine.json"))).toEqual({ version: own.version });
    for (const deps of ["dependencies", "optionalDependencies", "peerDependencies", "bundleDependencies"])
      expect(create[deps], deps).toBeUndefined();
    // Nothing staged stays behind in the checkout once packed (postpack).
    expect(existsSync(join(CREATE_PACKAGE, "template"))).toBe(false);
    expect(existsSync(join(CREATE_PACKAGE, "okengine.json"))).toBe(false);
  });

  it("installs with production dependencies only, and oke runs okengine compiled", async () => {
    const installed = join(app, "node_modules/okengine");
    expect(execFileSync("ls", [installed], { encoding: "utf8" })).not.toMatch(/^src$/m);
    // No dev tool of okengine's came along.
    for (const dev of ["typescript", "vitest", "eslint"]) {
      expect(() => execFileSync("ls", [join(app, "node_modules", dev)], { stdio: "ignore" })).toThrow();
    }
  });

  it("require() of any entry point says okengine is ES modules only and how to import it", async () => {
    for (const entry of ["okengine", "okengine/testing"]) {
      const r = await runToEnd(process.execPath, ["-e", `require(${JSON.stringify(entry)})`], {
        cwd: app,
        env: userEnv(),
      });
      expect(r.code).toBe(1);
      expect(r.output).toContain(
        'okengine is an ES module package and cannot be loaded with require(): import it from an ES module instead (import { flow } from "okengine")',
      );
    }
  });
});

describe("oke from the installed package", () => {
  it("oke routes lists the file-tree routes", async () => {
    const p = oke(["routes"]);
    expect(await p.exit, p.lines.join("\n")).toBe(0);
    expect(p.lines.join("\n")).toMatch(/GET\s+\/hello\s+hello/);
  });

  it("oke start serves a route on a real port and stops on SIGTERM", async () => {
    const p = oke(["start", "--port", "0", "--host", "127.0.0.1"]);
    const port = portOf(await p.line(/listening on http:\/\//));
    const res = await fetch(`http://127.0.0.1:${port}/hello`);
    expect(await res.json()).toEqual({ ok: true, data: { greeting: "Hello" } });
    p.child.kill("SIGTERM");
    expect(await p.exit, p.lines.join("\n")).toBe(0);
  });

  it("oke dev serves the app and stops on SIGINT", async () => {
    const p = oke(["dev", "--port", "0", "--host", "127.0.0.1"]);
    const port = portOf(await p.line(/listening on http:\/\//));
    expect((await fetch(`http://127.0.0.1:${port}/hello`)).status).toBe(200);
    p.child.kill("SIGINT");
    expect(await p.exit, p.lines.join("\n")).toBe(0);
  });

  it("operator commands run without tsx; the commands that load the project import it", async () => {
    const token = "package-test-operator-token-0123";
    const app = oke(["start", "--port", "0", "--host", "127.0.0.1"], {
      OKE_CONSOLE_PORT: "0",
      OKE_CONSOLE_TOKEN: token,
    });
    await app.line(/listening on http:\/\//);
    const consoleUrl = /okengine console on (http:\/\/[^\s"]+)/.exec(
      await app.line(/okengine console on /),
    )![1]!;
    // A resolve hook that fails every import of tsx: a command that works under it never loaded tsx.
    const hooks = writeTree({
      "no-tsx.mjs": [
        'import { register } from "node:module";',
        "const hook = `export async function resolve(s, c, next) {",
        '  if (s === "tsx" || s.startsWith("tsx/")) throw new Error("tsx imported: " + s);',
        "  return next(s, c);",
        "}`;",
        'register("data:text/javascript," + encodeURIComponent(hook));',
        "",
      ].join("\n"),
    });
    try {
      // The page itself, from the installed package (it once answered an empty reply: not shipped).
      const html = await fetch(`${consoleUrl}/`);
      expect(html.status).toBe(200);
      expect(html.headers.get("content-type")).toBe("text/html; charset=utf-8");
      expect(await html.text()).toContain('src="/console.js"');
      const js = await fetch(`${consoleUrl}/console.js`);
      expect(js.status).toBe(200);
      expect(await js.text()).toContain("async function signalView(");
      const noTsx = { NODE_OPTIONS: `--import=${join(hooks, "no-tsx.mjs")}` };
      const conn = { OKE_CONSOLE_URL: consoleUrl, OKE_CONSOLE_TOKEN: token };
      for (const args of [["status"], ["runs"]]) {
        const p = oke(args, { ...conn, ...noTsx });
        expect(await p.exit, p.lines.join("\n")).toBe(0);
        if (args[0] === "status") expect(p.lines[0]).toMatch(/^okengine at http:\/\/.* env prod/);
      }
      // The hook does bite: routes imports the project, so it registers tsx, and fails here.
      const routes = oke(["routes"], noTsx);
      expect(await routes.exit).toBe(1);
      expect(routes.lines.join("\n")).toContain("tsx imported: tsx/esm/api");
    } finally {
      rmSync(hooks, { recursive: true, force: true });
      app.child.kill("SIGTERM");
      await app.exit;
    }
  });

  it("createTestApp({ project }) works under node:test", async () => {
    const r = await runToEnd(process.execPath, ["--import", "tsx", "--test", "test/hello.test.ts"], {
      cwd: app,
      env: userEnv(),
    });
    expect(r.code, r.output).toBe(0);
    expect(r.output).toMatch(/pass 1/);
  });
});

describe("the first hour, from the tarballs: npm create / oke init, install, test, dev, a request, a stop", () => {
  let starter = "";
  afterAll(() => {
    if (starter) rmSync(join(starter, ".."), { recursive: true, force: true });
  });

  /** Every file under `dir`: path → bytes. */
  const tree = (dir: string): Record<string, Buffer> =>
    Object.fromEntries(
      execFileSync("find", [".", "-type", "f"], { cwd: dir, encoding: "utf8" })
        .trim()
        .split("\n")
        .sort()
        .map((f) => [f, readFileSync(join(dir, f))]),
    );

  it("npm create okengine (create-okengine's tarball alone through npm exec) scaffolds the starter", async () => {
    const parent = writeTree({});
    starter = join(parent, "my-app");
    // What `npm create okengine my-app` runs; no okengine tarball, and no native build to find.
    const r = await runToEnd(
      "npm",
      [
        "exec",
        "--yes",
        "--prefer-offline",
        "--loglevel=error",
        `--package=${createTarball}`,
        "--",
        "create-okengine",
        "my-app",
      ],
      { cwd: parent, env: userEnv() },
    );
    // npm exec installed the tarball under npm's cache (_npx/<hash of its path>): a new directory
    // every run, since the path is a temp dir. Removed, so runs leave nothing behind.
    const npxRoot = join(await npmCacheDir(), "_npx");
    const npx = readdirSync(npxRoot)
      .map((hash) => join(npxRoot, hash))
      .filter((d) => existsSync(join(d, "package.json")))
      .filter((d) => readFileSync(join(d, "package.json"), "utf8").includes(JSON.stringify(createTarball)));
    expect(npx, "npm exec's install directory").toHaveLength(1);
    // create-okengine and nothing else: no okengine, no better-sqlite3.
    expect(readdirSync(join(npx[0]!, "node_modules")).filter((f) => !f.startsWith("."))).toEqual([
      "create-okengine",
    ]);
    expect(await removeNpxInstalls([createTarball])).toEqual(npx);
    expect(r.code, r.output).toBe(0);
    expect(r.output).toContain(`Created an okengine app in ${starter}`);
    expect(r.output).toMatch(/cd my-app\n\s+npm install\n\s+npm run dev/);
    // One small tarball and no dependency (~3 s): the bound is npm's own start-up on a loaded machine.
  }, 120_000);

  it("oke init writes the very same files, and says what to do next", async () => {
    const initDir = join(writeTree({}), "my-app");
    const p = oke(["init", initDir]);
    expect(await p.exit, p.lines.join("\n")).toBe(0);
    const out = p.lines.join("\n");
    expect(out).toContain(`Created an okengine app in ${initDir}`);
    expect(out).toMatch(/npm install\n\s+npm run dev/);
    // The same directory name, so the same package name: byte for byte what create-okengine wrote.
    expect(tree(initDir)).toEqual(tree(starter));
    rmSync(join(initDir, ".."), { recursive: true, force: true });
    const files = execFileSync("find", [".", "-type", "f"], { cwd: starter, encoding: "utf8" });
    for (const f of [
      "./package.json",
      "./tsconfig.json",
      "./oke.config.ts",
      "./vitest.config.ts",
      "./.gitignore",
      "./src/signals/welcome.ts",
      "./src/channels/email.ts",
      "./src/flows/main/hello.ts",
      "./src/flows/workers/welcome.ts",
      "./src/flows/trials/start.ts",
      "./src/flows/trials/start.test.ts",
    ])
      expect(files).toContain(f);
    // A second init into the same directory refuses instead of overwriting.
    const again = oke(["init", starter]);
    expect(await again.exit).toBe(1);
    expect(again.lines[0]).toMatch(/is not empty/);
  });

  it(
    "installs (okengine from the tarball, the rest from the registry), and npm test passes",
    async () => {
      await npmInstall(starter, [tarball]);
      const t = await runToEnd("npm", ["test"], { cwd: starter, env: userEnv() });
      expect(t.code, t.output).toBe(0);
      expect(t.output).toMatch(/Tests\s+4 passed/);
      const types = await runToEnd("npm", ["run", "typecheck"], { cwd: starter, env: userEnv() });
      expect(types.code, types.output).toBe(0);
    },
    SETUP_MS,
  );

  it(
    "a third-party driver proves itself with okengine/store and okengine/store/conformance",
    async () => {
      writeTree(
        {
          "drivers/acme.test.ts": [
            'import { createMemoryStore, type Store } from "okengine/store";',
            'import { describeStoreConformance } from "okengine/store/conformance";',
            "",
            "// A stand-in for a driver of one's own: the memory driver under another name.",
            "function createAcmeStore(): Store {",
            "  const inner = createMemoryStore();",
            '  return new Proxy(inner, { get: (t, k) => (k === "driver" ? "acme" : Reflect.get(t, k)) });',
            "}",
            "",
            "// It has what the memory driver has, the optional leaveToLease, leaveClaimsToLease, resettleDelivered, releaseHold, terminateRun and getJournalEnds too: the suite checks them.",
            'describeStoreConformance("acme", async () => {',
            "  const store = createAcmeStore();",
            "  await store.open();",
            "  return { store, cleanup: () => store.close() };",
            "}, { leaveToLease: true, leaveClaimsToLease: true, resettleDelivered: true, releaseHold: true, terminateRun: true, lastTapePosition: true, deliveredFailed: true, discardPending: true, tapeGap: true, journalEnds: true });",
            "",
          ].join("\n"),
        },
        starter,
      );
      const r = await runToEnd("npx", ["vitest", "run", "drivers"], { cwd: starter, env: userEnv() });
      expect(r.code, r.output).toBe(0);
      expect(r.output).toMatch(/Tests\s+\d+ passed/);
      const types = await runToEnd(
        "npx",
        [
          "tsc",
          "--noEmit",
          "--types",
          "node",
          "drivers/acme.test.ts",
          "--module",
          "nodenext",
          "--strict",
          "--skipLibCheck",
        ],
        {
          cwd: starter,
          env: userEnv(),
        },
      );
      expect(types.code, types.output).toBe(0);
      rmSync(join(starter, "drivers"), { recursive: true, force: true });
    },
    SETUP_MS,
  );

  it("npm run dev serves the routes; a signup reaches the worker; Ctrl-C stops it", async () => {
    // Own process group, as a terminal would run it: Ctrl-C (SIGINT) reaches npm and oke at once.
    const p = run("npm", ["run", "dev", "--", "--port", "0", "--host", "127.0.0.1"], {
      cwd: starter,
      env: userEnv(),
      detached: true,
    });
    running.push(p);
    const base = `http://127.0.0.1:${portOf(await p.line(/listening on http:\/\//))}`;
    expect(await (await fetch(`${base}/hello`)).json()).toEqual({
      ok: true,
      data: { message: "Hello from okengine" },
    });
    const res = await fetch(`${base}/signup`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ email: "ada@example.com" }),
    });
    expect(res.status).toBe(200);
    // The console send driver prints what the worker sent.
    await p.line(/ada@example\.com/);
    process.kill(-p.child.pid!, "SIGINT");
    await p.exit;
    await expect(fetch(`${base}/hello`)).rejects.toThrow();
  });

  it("oke start (prod) says what production still needs: a DATABASE_URL that is a URL, and the email channel's url", async () => {
    const oke = join(starter, "node_modules/.bin/oke");
    const args = ["start", "--port", "0", "--host", "127.0.0.1"];
    // Scheme forgotten: refused before any connect, not retried for 30 s.
    const bad = await runToEnd(oke, args, {
      cwd: starter,
      env: userEnv({ DATABASE_URL: "app:hunter2@127.0.0.1:5432/app" }),
    });
    expect(bad.code, bad.output).toBe(1);
    expect(bad.output).toContain(
      'oke boot: DATABASE_URL is not a PostgreSQL URL: it does not start with postgres:// ("***@127.0.0.1:5432/app")',
    );
    expect(bad.output).toContain("code: OKE1098");
    expect(bad.output).toContain("postgres://user:password@host:5432/db");
    expect(bad.output).not.toContain("hunter2");
    expect(bad.output).not.toMatch(/unavailable|attempt/);
    // No database here: OKE_JOURNAL=file stands in for it. Without EMAIL_WEBHOOK_URL, boot warns.
    for (const hook of [undefined, "https://mail-relay.invalid/send"]) {
      const p = run(oke, args, {
        cwd: starter,
        env: userEnv({ OKE_JOURNAL: "file", ...(hook === undefined ? {} : { EMAIL_WEBHOOK_URL: hook }) }),
      });
      running.push(p);
      await p.line(/listening on http:\/\//);
      p.child.kill("SIGTERM");
      expect(await p.exit, p.lines.join("\n")).toBe(0);
      // Read once it exited: the log (pino, stdout) and the address line may arrive in either order.
      const warned = p.lines.filter((l) => l.includes("sends by webhook"));
      if (hook === undefined) {
        expect(warned, p.lines.join("\n")).toHaveLength(1);
        expect(warned[0]).toContain('channel \\"email\\"');
        expect(warned[0]).toContain("process.env.EMAIL_WEBHOOK_URL");
      } else expect(warned).toEqual([]);
    }
    // Three starts of the installed CLI: more than the default 30 s on a loaded machine.
  }, 90_000);
});
