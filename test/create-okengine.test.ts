// create-okengine: its own command line (help and refusals name `npm create okengine`), and the app it writes, byte for byte oke init's.
import { spawnSync } from "node:child_process";
import {
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { initProject, nextSteps } from "../src/cli/init.ts";

const REPO = join(import.meta.dirname, "..");
const PACKAGE = join(REPO, "packages/create-okengine");
const BIN = join(PACKAGE, "index.js");

describe("create-okengine --help", () => {
  it.each(["--help", "-h"])("%s prints its own usage and exits 0", (flag) => {
    const r = spawnSync(process.execPath, [BIN, flag], { encoding: "utf8" });
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/^Usage: npm create okengine@latest \[dir\]\n/);
    expect(r.stdout).toContain("npx okengine init [dir]");
    expect(r.stdout).not.toContain("Usage: oke init");
    expect(r.stderr).toBe("");
  });

  it.each([
    [["--force"], "unknown option '--force'"],
    [["app", "-y"], "unknown option '-y'"],
    [["a", "b"], "one directory at most, got 2: a b"],
  ])("%j is refused in its own words, with its usage and exit 1", (args, why) => {
    const r = spawnSync(process.execPath, [BIN, ...args], { encoding: "utf8", cwd: tmpdir() });
    expect(r.status).toBe(1);
    expect(r.stdout).toBe("");
    expect(r.stderr.split("\n").slice(0, 3)).toEqual([
      `create-okengine: ${why}`,
      "",
      "Usage: npm create okengine@latest [dir]",
    ]);
    expect(r.stderr).not.toContain("Usage: oke init");
  });
});

// The package as npm packs it: index.js beside what stage.js (its prepack) copies in from
// templates/starter and package.json. test/package.test.ts does the same from the real tarball.
describe("create-okengine writes what oke init writes, with no okengine installed", () => {
  const { version } = JSON.parse(readFileSync(join(REPO, "package.json"), "utf8")) as { version: string };
  let pkg = "";
  let work = "";
  let made = 0;
  beforeAll(() => {
    pkg = mkdtempSync(join(tmpdir(), "oke-create-pkg-"));
    work = mkdtempSync(join(tmpdir(), "oke-create-"));
    copyFileSync(BIN, join(pkg, "index.js"));
    const r = spawnSync(process.execPath, [join(PACKAGE, "stage.js"), pkg], { encoding: "utf8" });
    expect(r.status, r.stderr).toBe(0);
  });
  afterAll(() => {
    for (const d of [pkg, work]) if (d) rmSync(d, { recursive: true, force: true });
  });

  /** A new empty directory. */
  const fresh = (): string => {
    const d = join(work, String(made++));
    mkdirSync(d);
    return d;
  };
  const create = (args: string[], cwd: string) =>
    spawnSync(process.execPath, [join(pkg, "index.js"), ...args], { encoding: "utf8", cwd });
  /** oke init's own code run from `cwd`, as `oke init` typed there runs it (it reads the cwd). */
  const inDir = <T>(cwd: string, f: () => T): T => {
    const was = process.cwd();
    process.chdir(cwd);
    try {
      return f();
    } finally {
      process.chdir(was);
    }
  };
  /** Every file under `dir`: relative path → bytes. */
  const tree = (dir: string): Record<string, Buffer> =>
    Object.fromEntries(
      readdirSync(dir, { recursive: true, encoding: "utf8" })
        .filter((f) => statSync(join(dir, f)).isFile())
        .sort()
        .map((f) => [f, readFileSync(join(dir, f))]),
    );

  it("stages okengine's version; the package itself depends on nothing", () => {
    expect(JSON.parse(readFileSync(join(pkg, "okengine.json"), "utf8"))).toEqual({ version });
    const own = JSON.parse(readFileSync(join(PACKAGE, "package.json"), "utf8")) as Record<string, unknown>;
    expect(own.dependencies).toBeUndefined();
    // Released in lockstep: `npm create okengine@x` writes okengine x's starter.
    expect(own.version).toBe(version);
  });

  // "My App!" is no npm name as it is: both derive the same package name from it.
  it.each(["my-app", "My App!", "nested/dir/app"])(
    "create-okengine %s: the same bytes and the same next steps as oke init",
    (name) => {
      const [a, b] = [fresh(), fresh()];
      const steps = inDir(a, () => nextSteps(initProject(name, version).root)).replace(a, b);
      const r = create([name], b);
      expect(r.stderr).toBe("");
      expect(r.status).toBe(0);
      expect(r.stdout).toBe(`${steps}\n`);
      expect(r.stdout).toContain(`\n  cd ${name.includes(" ") ? JSON.stringify(name) : name}\n`);
      const files = tree(join(b, name));
      expect(Object.keys(files)).toContain(".gitignore");
      const app = JSON.parse(files["package.json"]!.toString()) as { dependencies: Record<string, string> };
      expect(app.dependencies.okengine).toBe(`^${version}`);
      expect(files).toEqual(tree(join(a, name)));
    },
  );

  it("with no dir: the current one (empty, or holding only .git), and no cd in the next steps", () => {
    // Same-named directories, so the same package name.
    const [a, b] = [join(fresh(), "app"), join(fresh(), "app")];
    for (const d of [a, b]) mkdirSync(d);
    mkdirSync(join(b, ".git"));
    const steps = inDir(a, () => nextSteps(initProject(".", version).root)).replace(a, b);
    const r = create([], b);
    expect(r.stderr).toBe("");
    expect(r.status).toBe(0);
    expect(r.stdout).toBe(`${steps}\n`);
    expect(r.stdout).not.toContain("cd ");
    rmSync(join(b, ".git"), { recursive: true });
    expect(tree(b)).toEqual(tree(a));
  });

  it.each([
    ["a directory holding files", { "a.txt": "", "b.txt": "", "c.txt": "", "d.txt": "" }],
    ["a directory holding one file", { "notes.md": "mine\n" }],
    ["a file", undefined],
  ])("refuses %s as oke init does: the same words, exit 1, nothing written", (_what, files) => {
    const parent = fresh();
    const target = join(parent, "app");
    if (files === undefined) writeFileSync(target, "mine\n");
    else {
      mkdirSync(target);
      for (const [f, text] of Object.entries(files)) writeFileSync(join(target, f), text);
    }
    const before = tree(parent);
    let refusal = "";
    inDir(parent, () => {
      try {
        initProject("app", version);
      } catch (e) {
        refusal = (e as Error).message;
      }
    });
    expect(refusal).toMatch(/^oke init: app (is not empty|exists and is not a directory)/);
    const r = create(["app"], parent);
    expect(r.status).toBe(1);
    expect(r.stdout).toBe("");
    expect(r.stderr).toBe(`${refusal.replace(/^oke init: /, "create-okengine: ")}\n`);
    expect(tree(parent)).toEqual(before);
  });
});
