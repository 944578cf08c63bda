#!/usr/bin/env node
// `npm create okengine [dir]`: runs `oke init [dir]` of the okengine it depends on, so both write the one starter (okengine's templates/starter).
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import process from "node:process";

/** The path of okengine's `oke` bin, or undefined when okengine is not installed next to this package. */
function okeBin() {
  let manifest;
  try {
    manifest = createRequire(import.meta.url).resolve("okengine/package.json");
  } catch {
    return undefined;
  }
  const pkg = JSON.parse(readFileSync(manifest, "utf8"));
  return join(dirname(manifest), typeof pkg.bin === "string" ? pkg.bin : pkg.bin.oke);
}

const oke = okeBin();
if (oke === undefined) {
  process.stderr.write(
    "create-okengine: okengine is not installed next to it; try `npx okengine init [dir]`\n",
  );
  process.exitCode = 1;
} else {
  const args = process.argv.slice(2);
  const init = args.includes("-h") || args.includes("--help") ? ["init", "--help"] : ["init", ...args];
  const r = spawnSync(process.execPath, [oke, ...init], { stdio: "inherit" });
  if (r.error) process.stderr.write(`create-okengine: could not run oke init: ${r.error.message}\n`);
  process.exitCode = r.status ?? 1;
}
