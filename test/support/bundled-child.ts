// A test's child program bundled by esbuild into one ES module, so each process the test starts runs without tsx.
import { createHash } from "node:crypto";
import { mkdirSync, readdirSync, renameSync, rmSync, statSync, writeFileSync, existsSync } from "node:fs";
import { basename, join } from "node:path";
import { fileURLToPath } from "node:url";
import { buildSync } from "esbuild";

/**
 * Two levels below the repository, so the paths okengine's modules take relative to themselves
 * (../../package.json, ../../src/console/page/) land where they do from src/<folder>/.
 */
const DIR = fileURLToPath(new URL("../../.test-build-children/bundles/", import.meta.url));
/** A bundle this much older than now is left over from an earlier state of the sources. */
const STALE_MS = 3_600_000;

const bundles = new Map<string, string>();

/**
 * The path of `entry` (a .ts child program) bundled with the okengine sources it imports; npm
 * packages stay imports, found in the repository's node_modules. Built once per test process
 * (~0.3 s) and named by its content. A child started from it costs ~0.5 s of CPU instead of ~1.4 s
 * under `--import tsx` (measured on test/process/child-app.ts). Used by the file driver's crash test;
 * test/process/spawn.ts says why the process tests do not use it yet.
 */
export function bundledChild(entry: string): string {
  let out = bundles.get(entry);
  if (out !== undefined) return out;
  const { outputFiles } = buildSync({
    entryPoints: [entry],
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    packages: "external",
    write: false,
    logLevel: "error",
  });
  const code = outputFiles[0]!.contents;
  const name = basename(entry).replace(/\.ts$/, "");
  out = join(DIR, `${name}-${createHash("sha256").update(code).digest("hex").slice(0, 16)}.mjs`);
  if (!existsSync(out)) {
    mkdirSync(DIR, { recursive: true });
    // Written aside and renamed: another test process may be starting the same bundle.
    const tmp = `${out}.${process.pid}.tmp`;
    writeFileSync(tmp, code);
    renameSync(tmp, out);
    for (const f of readdirSync(DIR))
      if (f.startsWith(`${name}-`) && join(DIR, f) !== out) {
        try {
          if (Date.now() - statSync(join(DIR, f)).mtimeMs > STALE_MS) rmSync(join(DIR, f), { force: true });
        } catch {
          // Removed by another test process meanwhile.
        }
      }
  }
  bundles.set(entry, out);
  return out;
}
