// `oke init [dir]`: writes the starter app (templates/starter) into a new or empty directory.
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
import { fileURLToPath } from "node:url";
import { CliError } from "../project/load-project.ts";

const TEMPLATE = fileURLToPath(new URL("../../templates/starter", import.meta.url));
/** Files whose text carries `{{name}}` / `{{version}}`. */
const FILLED = ["package.json", "README.md"];

/** The package name for a directory: npm names are lower case, without spaces. */
const packageName = (dir: string): string =>
  basename(dir)
    .toLowerCase()
    .replace(/[^a-z0-9._-]+/g, "-")
    .replace(/^[._-]+|-+$/g, "") || "okengine-app";

export interface InitResult {
  root: string;
  files: string[];
}

/** Copies the starter into `dir` (created if missing; refused when it holds anything). */
export function initProject(dir: string, version: string): InitResult {
  const root = resolve(dir);
  if (existsSync(root)) {
    if (!statSync(root).isDirectory()) throw new CliError(`oke init: ${dir} exists and is not a directory`);
    const present = readdirSync(root).filter((f) => f !== ".git");
    if (present.length > 0)
      throw new CliError(
        `oke init: ${dir} is not empty (${present.slice(0, 3).join(", ")}${present.length > 3 ? ", …" : ""}); pick a new directory`,
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
  const files = readdirSync(root, { recursive: true, encoding: "utf8" })
    .filter((f) => statSync(join(root, f)).isFile())
    .sort();
  return { root, files };
}

/** What `oke init` prints after writing the files. */
export function nextSteps(root: string): string {
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
