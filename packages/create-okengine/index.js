#!/usr/bin/env node
// `npm create okengine [dir]`: writes the starter app, the same files as `oke init [dir]`, with no dependency (no okengine, no native module).
import {
  cpSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { basename, join, relative, resolve } from "node:path";
import process from "node:process";
import { fileURLToPath, URL } from "node:url";

// Both are copied in at pack time (stage.js, the prepack script) from okengine's templates/starter
// and package.json: what `oke init` of that okengine version writes, this writes.
const TEMPLATE = fileURLToPath(new URL("./template", import.meta.url));
const VERSION_FILE = fileURLToPath(new URL("./okengine.json", import.meta.url));

// Its own usage, not `oke init`'s: the command typed was `npm create okengine`.
const USAGE = `Usage: npm create okengine@latest [dir]
       (or npx create-okengine [dir])

Creates an okengine starter app (an HTTP flow, a work queue and its worker, a durable flow, tests) in
dir, a new or empty directory (default: the current one). The same files as \`npx okengine init [dir]\`.

Then: cd dir && npm install && npm run dev

Options:
  -h, --help  display this help
`;

// From here to nextSteps: src/cli/init.ts in plain JavaScript. Keep the two in step; the tests
// (test/create-okengine.test.ts, test/package.test.ts) compare their output byte for byte.

/** Files whose text carries `{{name}}` / `{{version}}`. */
const FILLED = ["package.json", "README.md"];

/** The package name for a directory: npm names are lower case, without spaces. */
const packageName = (dir) =>
  basename(dir)
    .toLowerCase()
    .replace(/[^a-z0-9._-]+/g, "-")
    .replace(/^[._-]+|-+$/g, "") || "okengine-app";

/** Copies the starter into `dir` (created if missing; refused when it holds anything); returns its absolute path. */
function initProject(dir, version) {
  const root = resolve(dir);
  if (existsSync(root)) {
    if (!statSync(root).isDirectory()) throw new Error(`${dir} exists and is not a directory`);
    const present = readdirSync(root).filter((f) => f !== ".git");
    if (present.length > 0)
      throw new Error(
        `${dir} is not empty (${present.slice(0, 3).join(", ")}${present.length > 3 ? ", …" : ""}); pick a new directory`,
      );
  }
  mkdirSync(root, { recursive: true });
  cpSync(TEMPLATE, root, { recursive: true });
  // npm never publishes a file named .gitignore, so the template carries it without the dot.
  renameSync(join(root, "gitignore"), join(root, ".gitignore"));
  for (const file of FILLED) {
    const path = join(root, file);
    writeFileSync(
      path,
      readFileSync(path, "utf8").replaceAll("{{name}}", packageName(root)).replaceAll("{{version}}", version),
    );
  }
  return root;
}

/** What `oke init` prints after writing the files. */
function nextSteps(root) {
  const rel = relative(process.cwd(), root) || ".";
  const cd = rel.startsWith("..") ? root : rel;
  return [
    `Created an okengine app in ${root}`,
    "",
    "Next:",
    ...(cd === "." ? [] : [`  cd ${cd.includes(" ") ? JSON.stringify(cd) : cd}`]),
    "  npm install",
    "  npm run dev        # http://127.0.0.1:6530, restarts on every change",
    "  curl 127.0.0.1:6530/hello",
    "  curl -X POST 127.0.0.1:6530/signup -H 'content-type: application/json' -d '{\"email\":\"ada@example.com\"}'",
    "  npm test           # the tests in src/, with time travel",
    "",
    "Then read src/flows/trials/start.ts (a durable flow that sleeps 3 days) and the guide,",
    "node_modules/okengine/docs/getting-started.md (after npm install).",
  ].join("\n");
}

/** The okengine version the new app depends on, baked in at pack time. */
function okengineVersion() {
  // Run from a checkout, where nothing was staged: say so rather than fail on a missing file.
  if (!existsSync(VERSION_FILE) || !existsSync(TEMPLATE))
    throw new Error(
      "the starter is missing from this package (it is copied in when packed: npm pack runs stage.js); try `npx okengine init [dir]`",
    );
  return JSON.parse(readFileSync(VERSION_FILE, "utf8")).version;
}

const args = process.argv.slice(2);
const unknown = args.find((a) => a.startsWith("-") && a !== "-h" && a !== "--help");
const dirs = args.filter((a) => !a.startsWith("-"));
if (args.includes("-h") || args.includes("--help")) {
  process.stdout.write(USAGE);
} else if (unknown !== undefined || dirs.length > 1) {
  process.stderr.write(
    `create-okengine: ${unknown === undefined ? `one directory at most, got ${dirs.length}: ${dirs.join(" ")}` : `unknown option '${unknown}'`}\n\n${USAGE}`,
  );
  process.exitCode = 1;
} else {
  try {
    process.stdout.write(`${nextSteps(initProject(dirs[0] ?? ".", okengineVersion()))}\n`);
  } catch (e) {
    // A refusal in its words; anything else (no permission, a full disk) with the system's.
    process.stderr.write(`create-okengine: ${e instanceof Error ? e.message : String(e)}\n`);
    process.exitCode = 1;
  }
}
