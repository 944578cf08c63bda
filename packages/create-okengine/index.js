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

// Its own usage, not `oke init`'s: the command typed was `npm create okengine`, and it needs no okengine.
const USAGE = `Usage: npm create okengine@latest [dir]
       (or npx create-okengine [dir])

Creates an okengine starter app (an HTTP flow, a work queue and its worker, a durable flow, tests) in
dir, a new or empty directory (default: the current one). The same files as \`npx okengine init [dir]\`.

Then: cd dir && npm install && npm run dev

Options:
  -h, --help  display this help
`;

const args = process.argv.slice(2);
// Refused here, in its own words: passed on, `oke init` would answer with its usage, not this one.
const unknown = args.find((a) => a.startsWith("-") && a !== "-h" && a !== "--help");
const dirs = args.filter((a) => !a.startsWith("-"));
const oke = okeBin();
if (args.includes("-h") || args.includes("--help")) {
  process.stdout.write(USAGE);
} else if (unknown !== undefined || dirs.length > 1) {
  process.stderr.write(
    `create-okengine: ${unknown === undefined ? `one directory at most, got ${dirs.length}: ${dirs.join(" ")}` : `unknown option '${unknown}'`}\n\n${USAGE}`,
  );
  process.exitCode = 1;
} else if (oke === undefined) {
  process.stderr.write(
    "create-okengine: okengine is not installed next to it; try `npx okengine init [dir]`\n",
  );
  process.exitCode = 1;
} else {
  const r = spawnSync(process.execPath, [oke, "init", ...args], { stdio: "inherit" });
  if (r.error) process.stderr.write(`create-okengine: could not run oke init: ${r.error.message}\n`);
  process.exitCode = r.status ?? 1;
}
