// Copies okengine's starter (templates/starter) and version into create-okengine at pack time; `--clean` removes them.
// Usage: node stage.js [dir] | node stage.js --clean [dir]   (dir: this package's folder by default)
// Run by npm as prepack / postpack, so the one starter lives in templates/starter and git holds no copy.
import { cpSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import process from "node:process";
import { fileURLToPath, URL } from "node:url";

const REPO = fileURLToPath(new URL("../../", import.meta.url));
const args = process.argv.slice(2);
const clean = args.includes("--clean");
const dir = resolve(args.find((a) => a !== "--clean") ?? fileURLToPath(new URL(".", import.meta.url)));
const template = join(dir, "template");
const versionFile = join(dir, "okengine.json");

// A copy left by an interrupted pack is never reused: always the starter as it is now.
rmSync(template, { recursive: true, force: true });
rmSync(versionFile, { force: true });
if (!clean) {
  cpSync(join(REPO, "templates/starter"), template, { recursive: true });
  const { version } = JSON.parse(readFileSync(join(REPO, "package.json"), "utf8"));
  writeFileSync(versionFile, `${JSON.stringify({ version }, null, 2)}\n`);
}
