// Packs this repository with `npm pack` (which builds dist/ in prepack) and installs the tarball into temp apps.
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { execFileSync } from "node:child_process";
import { runToEnd, userEnv } from "./proc.ts";

export const REPO = fileURLToPath(new URL("../../", import.meta.url));

/** packages/create-okengine: `npm create okengine`, which carries the starter (staged at pack time) and depends on nothing. */
export const CREATE_PACKAGE = join(REPO, "packages/create-okengine");

/** `npm pack` of this repository (or of `dir`, e.g. CREATE_PACKAGE) into a fresh temp dir; returns the tarball's path. */
export async function packRepo(dir = REPO): Promise<string> {
  const dest = mkdtempSync(join(tmpdir(), "oke-pack-"));
  const r = await runToEnd("npm", ["pack", "--pack-destination", dest, "--silent"], {
    cwd: dir,
    env: userEnv(),
  });
  if (r.code !== 0) throw new Error(`npm pack failed:\n${r.output}`);
  const tgz = readdirSync(dest).find((f) => f.endsWith(".tgz"));
  if (tgz === undefined) throw new Error(`npm pack wrote no tarball:\n${r.output}`);
  return join(dest, tgz);
}

/**
 * `npm install` in `dir` with the registry's cached packages when it has them
 * (`--prefer-offline`), nothing interactive, no audit.
 */
export async function npmInstall(dir: string, args: string[] = []): Promise<void> {
  const r = await runToEnd(
    "npm",
    ["install", "--prefer-offline", "--no-audit", "--no-fund", "--loglevel=error", ...args],
    { cwd: dir, env: userEnv(nativePrebuildsEnv()) },
  );
  if (r.code !== 0) throw new Error(`npm install ${args.join(" ")} failed in ${dir}:\n${r.output}`);
}

/** A new directory holding `files` (paths relative to it). */
export function writeTree(
  files: Record<string, string>,
  dir = mkdtempSync(join(tmpdir(), "oke-app-")),
): string {
  for (const [path, text] of Object.entries(files)) {
    const full = join(dir, path);
    mkdirSync(dirname(full), { recursive: true });
    writeFileSync(full, text);
  }
  return dir;
}

let cacheDir: Promise<string> | undefined;
/**
 * npm's cache directory as a child npm with the user's env sees it (asked
 * once per test file: start it early, beside the pack, and it costs nothing).
 */
export function npmCacheDir(cwd = REPO): Promise<string> {
  return (cacheDir ??= runToEnd("npm", ["config", "get", "cache"], { cwd, env: userEnv() }).then((r) => {
    if (r.code !== 0) throw new Error(`npm config get cache failed:\n${r.output}`);
    return r.output.trim().split("\n").pop()!.trim();
  }));
}

/**
 * Removes the install directories `npm exec --package=<tarball>` left in npm's
 * cache (`<cache>/_npx/<hash>`, one per set of package specs: a new tarball
 * path is a new directory each run). Only directories whose recorded packages
 * name one of `tarballs` are touched, so a concurrent npx of anyone else's is
 * left alone. Returns the directories removed.
 */
export async function removeNpxInstalls(tarballs: string[], cwd = REPO): Promise<string[]> {
  const wanted = tarballs.filter((t) => t !== "");
  if (wanted.length === 0) return [];
  const npx = join(await npmCacheDir(cwd), "_npx");
  if (!existsSync(npx)) return [];
  const removed: string[] = [];
  for (const hash of readdirSync(npx)) {
    const dir = join(npx, hash);
    let packages: unknown;
    try {
      packages = (
        JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as { _npx?: { packages?: unknown } }
      )._npx?.packages;
    } catch {
      continue; // another npx still installing, or not one of ours
    }
    if (!Array.isArray(packages) || !packages.some((p) => wanted.includes(String(p)))) continue;
    rmSync(dir, { recursive: true, force: true });
    removed.push(dir);
  }
  return removed;
}

let prebuilds: string | undefined;

/**
 * The env that lets an install take better-sqlite3 (the file driver's engine) prebuilt.
 * Here no prebuilt binary can be downloaded, so each install compiled it with node-gyp
 * (~85 s idle, three installs in package.test.ts). Its install step, prebuild-install, first
 * looks in a local folder named by `npm_config_better_sqlite3_local_prebuilds` for the archive
 * it would download; this puts there the binary this checkout's own install compiled from the
 * same version, for the same Node ABI. The compile itself is checked where it happens: `npm ci`
 * of a clean clone in .ci/run. Without a compiled binary here, installs compile as before.
 */
export function nativePrebuildsEnv(): Record<string, string> {
  const pkg = join(REPO, "node_modules/better-sqlite3");
  const binary = "build/Release/better_sqlite3.node";
  if (!existsSync(join(pkg, binary))) return {};
  if (prebuilds === undefined) {
    const { version } = JSON.parse(readFileSync(join(pkg, "package.json"), "utf8")) as { version: string };
    const dir = mkdtempSync(join(tmpdir(), "oke-prebuilds-"));
    const name = `better-sqlite3-v${version}-node-v${process.versions.modules}-${process.platform}-${process.arch}.tar.gz`;
    execFileSync("tar", ["-czf", join(dir, name), "-C", pkg, binary]);
    prebuilds = dir;
  }
  return { npm_config_better_sqlite3_local_prebuilds: prebuilds };
}

/** Removes the folder nativePrebuildsEnv() made, if it made one. */
export function removeNativePrebuilds(): void {
  if (prebuilds !== undefined) rmSync(prebuilds, { recursive: true, force: true });
  prebuilds = undefined;
}
