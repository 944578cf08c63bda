/** Loads a project directory as `oke` does: oke.config.ts, src/signals, src/channels, src/flows, with the @/ alias. */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { register } from "node:module";
import { dirname, join, relative, resolve, sep } from "node:path";
import { pathToFileURL } from "node:url";
import type { OkeConfig } from "../app/config.ts";
import type { ModuleInput } from "../app/types.ts";
import type { ResolveHookData } from "./resolve-hook.ts";
import { declaredExports, recordSourceEffects } from "./source-effects.ts";
import { readPathAliases, type PathAliases } from "./tsconfig-paths.ts";

/** A boot error the CLI prints as is (no stack). */
export class CliError extends Error {
  override readonly name = "CliError";
}

export interface LoadedProject {
  root: string;
  config: OkeConfig | undefined;
  /** The config file, relative to root, when there is one. */
  configFile: string | undefined;
  modules: ModuleInput[];
}

/** Folders adopted under src/, in this order. */
export const PROJECT_FOLDERS = ["signals", "channels", "flows"] as const;
export const CONFIG_FILES = ["oke.config.ts", "oke.config.mts", "oke.config.js", "oke.config.mjs"] as const;

const SOURCE = /\.(ts|mts|js|mjs)$/;
const DECLARATION = /\.d\.m?ts$/;
/** Parts of a file name that make it a test, between dots: `a.test.ts`, `a.spec.ts`, `a.test-d.ts`, `a.bench.ts`, `a.node-test.ts`. */
const TEST_PART = /^(test|spec|test-d|spec-d|bench|[\w-]+-(test|spec))$/;
/** Folders whose files are tests or their helpers, never app modules. */
const TEST_FOLDERS: ReadonlySet<string> = new Set(["__tests__", "__mocks__"]);

/**
 * True for files a test runner owns: one of the name's dot-separated parts after the first is
 * `test`, `spec`, `test-d`, `spec-d`, `bench` or ends in `-test`/`-spec`, or the file is under
 * `__tests__/` or `__mocks__/`. Loading one as an app module would run its tests at boot; and since
 * no app loads one, `oke dev` restarts on none (src/cli/dev.ts asks this same function).
 */
export function isTestFile(file: string): boolean {
  const segs = file.split(/[\\/]/);
  const parts = (segs[segs.length - 1] ?? "").split(".").slice(1, -1);
  return parts.some((p) => TEST_PART.test(p)) || isTestFolder(segs.slice(0, -1).join("/"));
}

/** True for a folder `__tests__/` or `__mocks__/`, or one under it: the loader takes no file in it, and `oke dev` watches none. */
export function isTestFolder(dir: string): boolean {
  return dir.split(/[\\/]/).some((s) => TEST_FOLDERS.has(s));
}

/** Source files of one folder, recursively, relative to root with "/" separators, sorted. */
export function listModules(root: string, folder: string): string[] {
  const dir = join(root, "src", folder);
  if (!existsSync(dir)) return [];
  const files = readdirSync(dir, { recursive: true, encoding: "utf8" })
    .filter((f) => SOURCE.test(f) && !DECLARATION.test(f) && !isTestFile(f))
    .filter((f) => !f.split(sep).some((seg) => seg.startsWith(".") || seg === "node_modules"))
    .filter((f) => statSync(join(dir, f)).isFile())
    .map((f) => relative(root, join(dir, f)).split(sep).join("/"));
  return files.sort();
}

/** The tsconfig's path aliases; a tsconfig that cannot be read (or extends a missing file) is a boot error. */
const projectAliases = (root: string): PathAliases => {
  try {
    return readPathAliases(root);
  } catch (e) {
    throw new CliError(e instanceof Error ? e.message : String(e), { cause: e });
  }
};

let registeredFor: string | undefined;

/** `.ts` when okengine runs from its sources (a checkout, tests), `.js` when it runs compiled (dist/). */
const OWN_EXT = import.meta.url.endsWith(".ts") ? ".ts" : ".js";

/** Installs the resolve hook for this project (once per process: hooks cannot be removed). */
export function registerProjectResolution(root: string): void {
  if (registeredFor === root) return;
  if (registeredFor !== undefined)
    throw new Error(`oke: a process can load one project (already loaded ${registeredFor})`);
  const aliases = projectAliases(root);
  const data: ResolveHookData = {
    srcUrl: `${pathToFileURL(join(root, "src")).href}/`,
    exact: {
      ...aliases.exact,
      okengine: [new URL(`../index${OWN_EXT}`, import.meta.url).href],
      "okengine/testing": [new URL(`../testing${OWN_EXT}`, import.meta.url).href],
    },
    patterns: aliases.patterns,
  };
  register(`./resolve-hook${OWN_EXT}`, { parentURL: import.meta.url, data });
  registeredFor = root;
}

const isProjectRoot = (dir: string): boolean =>
  existsSync(join(dir, "package.json")) ||
  CONFIG_FILES.some((f) => existsSync(join(dir, f))) ||
  existsSync(join(dir, "src"));

/**
 * The project folder exists and looks like one: a package.json, an oke.config.* or a src/ folder.
 * Run from inside src/ (or any other folder of the project), `oke` would otherwise find no
 * flows, serve nothing and leave a .oke/ there; instead it says which folder it meant.
 */
export function checkProjectDir(dir: string): string {
  const root = resolve(dir);
  if (!existsSync(root) || !statSync(root).isDirectory())
    throw new CliError(`oke: project directory "${dir}" not found`);
  if (isProjectRoot(root)) return root;
  let above: string | undefined;
  for (let d = dirname(root); above === undefined && dirname(d) !== d; d = dirname(d))
    if (isProjectRoot(d)) above = d;
  throw new CliError(
    `oke: ${root} is not a project folder: it has no package.json, oke.config.ts or src/` +
      (above === undefined ? "" : `; the project seems to be ${above}: run oke there, or pass that folder`),
  );
}

/**
 * okengine is ESM. Outside an ES module scope tsx compiles the project to
 * CommonJS, which then fails in confusing ways (require() of ESM cycles,
 * stale transforms from its cache), so say what to fix up front.
 */
function checkEsmScope(root: string): void {
  for (let dir = root; ; dir = dirname(dir)) {
    const file = join(dir, "package.json");
    if (existsSync(file)) {
      let type: unknown;
      try {
        type = (JSON.parse(readFileSync(file, "utf8")) as { type?: unknown }).type;
      } catch {
        throw new CliError(`oke: cannot parse ${file}`);
      }
      if (type === "module") return;
      throw new CliError(`oke: ${file} must say "type": "module" (okengine projects are ES modules)`);
    }
    if (dirname(dir) === dir)
      throw new CliError(`oke: no package.json in ${root} or above; add one with "type": "module"`);
  }
}

/** Export names of a Next.js-style route handler (`export async function GET() {…}`) and the http.* trigger each means. */
const ROUTE_HANDLER_NAMES: Readonly<Record<string, string>> = {
  GET: "get",
  POST: "post",
  PUT: "put",
  PATCH: "patch",
  DELETE: "delete",
};

/**
 * Functions exported from src/flows/ under an HTTP method's name (`export async function GET()`,
 * as Next.js and SvelteKit route files are written): okengine adopts only flows bound by on(…), so
 * such a file loads and its route answers 404 with nothing said. One warning text per export, saying
 * how the route is written here; `oke dev` logs them at boot.
 */
export function routeHandlerWarnings(
  modules: readonly ModuleInput[],
): Array<{ source: string; message: string }> {
  const warnings: Array<{ source: string; message: string }> = [];
  for (const mod of modules) {
    if (mod.path === undefined || !mod.path.startsWith("src/flows/")) continue;
    for (const [name, value] of Object.entries(mod.exports)) {
      const method = ROUTE_HANDLER_NAMES[name];
      if (method === undefined || typeof value !== "function") continue;
      const base = mod.path.replace(/^.*\//, "").replace(SOURCE, "");
      // The export's name must be an identifier; a file named "[id].ts" or "index.ts" gets "handler".
      const exportAs = /^[A-Za-z_$][\w$]*$/.test(base) && base !== "index" ? base : "handler";
      warnings.push({
        source: `${mod.path}#${name}`,
        message:
          `${mod.path} exports a function ${name} (a Next.js-style route handler), which okengine does not serve: ` +
          `the route answers 404. Routes are flows bound to a trigger: ` +
          `export const ${exportAs} = on(http.${method}(), flow({ do: async (input, fx) => { … } })) ` +
          `(imported from "okengine"; the path comes from the file, see docs/routing.md)`,
      });
    }
  }
  return warnings;
}

const importFile = async (root: string, file: string): Promise<Record<string, unknown>> => {
  try {
    return (await import(pathToFileURL(join(root, file)).href)) as Record<string, unknown>;
  } catch (e) {
    const message = e instanceof Error ? e.message : String(e);
    throw new CliError(`oke: cannot load ${file}: ${message}`, { cause: e });
  }
};

/**
 * Loads `<dir>/oke.config.ts` (optional) and every module under src/signals,
 * src/channels and src/flows, through tsx: TypeScript, `@/` and `okengine`
 * imports work without a build step. Requires tsx to be registered (src/cli/typescript.ts).
 */
export async function loadProject(dir: string): Promise<LoadedProject> {
  const root = checkProjectDir(dir);
  checkEsmScope(root);
  // Under vitest with okengine/vitest's plugin, vitest resolves `@/` and loads TypeScript itself.
  if (process.env.OKE_VITEST_PLUGIN !== "1") {
    if (process.env.VITEST !== undefined && !import.meta.url.endsWith(".ts"))
      throw new CliError(
        'oke: createTestApp({ project }) under vitest needs the okengine plugin: in vitest.config.ts, import { okengine } from "okengine/vitest" and add plugins: [okengine()]',
      );
    registerProjectResolution(root);
  }

  const configFile = CONFIG_FILES.find((f) => existsSync(join(root, f)));
  let config: OkeConfig | undefined;
  if (configFile !== undefined) {
    const mod = await importFile(root, configFile);
    if (typeof mod.default !== "object" || mod.default === null) {
      throw new CliError(`oke: ${configFile} must export a config: export default defineConfig({ ... })`);
    }
    config = mod.default;
  }

  const modules: ModuleInput[] = [];
  const aliases = projectAliases(root);
  for (const folder of PROJECT_FOLDERS) {
    for (const file of listModules(root, folder)) {
      const exports = await importFile(root, file);
      // Flows get the signals their code emits and reads recorded in the Manifest.
      const sourceEffects =
        folder === "flows" ? await recordSourceEffects(root, join(root, file), exports, aliases) : {};
      // Names a barrel takes from another file: their routes and names come from that file.
      const declared = declaredExports(join(root, file));
      const reexports = declared === undefined ? [] : Object.keys(exports).filter((k) => !declared.has(k));
      modules.push({ path: file, exports, sourceEffects, ...(reexports.length > 0 ? { reexports } : {}) });
    }
  }
  return { root, config, configFile, modules };
}
