// The oke CLI compiled from the current sources into .test-build/, once per source state, for tests that start many `oke` processes.
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const REPO = fileURLToPath(new URL("../../", import.meta.url));
/**
 * One level below the repository, as dist/ is: the compiled CLI finds package.json, bin/ and the
 * Console's page sources by paths relative to itself (../../package.json), as the published
 * package's dist/ does. Not dist/ itself: test/package.test.ts's `npm pack` rebuilds that.
 */
const OUT = join(REPO, ".test-build");
const STAMP = join(OUT, ".source-hash");
const LOCK = join(REPO, ".test-build.lock");

/** The build's inputs: the TypeScript under src/ but tests and fixtures, and the tsconfigs. */
function sourceHash(): string {
  const h = createHash("sha256");
  const walk = (dir: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true }).sort((a, b) =>
      a.name.localeCompare(b.name),
    )) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) {
        if (entry.name !== "fixtures") walk(path);
      } else if (entry.name.endsWith(".ts") && !entry.name.endsWith(".test.ts"))
        h.update(`${relative(REPO, path)}\0`).update(readFileSync(path));
    }
  };
  walk(join(REPO, "src"));
  for (const f of ["tsconfig.json", "tsconfig.build.json", "package.json"])
    h.update(readFileSync(join(REPO, f)));
  return h.digest("hex");
}

/** Takes the build lock (a directory: mkdir is atomic), waiting for another test file's build; a lock older than 5 min is a dead build's. */
async function withLock<T>(fn: () => T): Promise<T> {
  for (;;) {
    try {
      mkdirSync(LOCK);
      break;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
      try {
        if (Date.now() - statSync(LOCK).mtimeMs > 300_000) rmSync(LOCK, { recursive: true, force: true });
      } catch {
        // Released between the two calls.
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  try {
    return fn();
  } finally {
    rmSync(LOCK, { recursive: true, force: true });
  }
}

let built: Promise<string> | undefined;

/**
 * The path of the compiled CLI's entry (.test-build/cli/main.js), built if the sources changed since
 * the last build. An `oke` command started from it loads plain JavaScript instead of compiling
 * okengine's sources through tsx (~0.3 s of CPU each; the commands that load a project still
 * register tsx for the project's own files, as an installed okengine does). Type errors are
 * `npm run typecheck`'s to find: this build skips the check.
 */
export function builtOke(): Promise<string> {
  built ??= withLock(() => {
    const hash = sourceHash();
    if (existsSync(STAMP) && readFileSync(STAMP, "utf8") === hash) return join(OUT, "cli/main.js");
    const tmp = `${OUT}.tmp`;
    rmSync(tmp, { recursive: true, force: true });
    const tsc = spawnSync(
      process.execPath,
      [
        join(REPO, "node_modules/typescript/bin/tsc"),
        "-p",
        join(REPO, "tsconfig.build.json"),
        "--outDir",
        tmp,
        "--noCheck",
        "--declaration",
        "false",
      ],
      { cwd: REPO, encoding: "utf8" },
    );
    if (tsc.status !== 0) throw new Error(`building .test-build failed:\n${tsc.stdout}${tsc.stderr}`);
    writeFileSync(join(tmp, ".source-hash"), hash);
    rmSync(OUT, { recursive: true, force: true });
    renameSync(tmp, OUT);
    return join(OUT, "cli/main.js");
  });
  return built;
}

/** The environment a compiled `oke` child gets: without vitest's markers (the compiled CLI would take itself for code under test). */
export function withoutVitestEnv(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const out = { ...env };
  for (const k of Object.keys(out)) if (k === "VITEST" || k.startsWith("VITEST_")) delete out[k];
  return out;
}
