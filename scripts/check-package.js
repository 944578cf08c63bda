#!/usr/bin/env node
// Lints the published shape of the package: publint (package.json vs files) and
// arethetypeswrong (types resolve for ESM consumers). Usage: node scripts/check-package.js [tarball]
// Without a tarball it packs one (npm pack runs the build in prepack) and removes it afterwards.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { fileURLToPath, URL } from "node:url";

const repo = new URL("..", import.meta.url);
let tarball = process.argv[2];
let temp;
if (tarball === undefined) {
  temp = mkdtempSync(join(tmpdir(), "oke-check-"));
  execFileSync("npm", ["pack", "--silent", "--pack-destination", temp], { cwd: repo, stdio: "inherit" });
  tarball = join(
    temp,
    readdirSync(temp).find((f) => f.endsWith(".tgz")),
  );
}
const bin = (name) => fileURLToPath(new URL(`../node_modules/.bin/${name}`, import.meta.url));
try {
  execFileSync(bin("publint"), ["run", tarball, "--strict"], { cwd: repo, stdio: "inherit" });
  // esm-only: okengine is ESM; CommonJS require() of it is not a supported use (bin/esm-only.cjs says so).
  execFileSync(bin("attw"), [tarball, "--profile", "esm-only", "--no-emoji", "--no-color"], {
    cwd: repo,
    stdio: "inherit",
  });
} finally {
  if (temp !== undefined) rmSync(temp, { recursive: true, force: true });
}
