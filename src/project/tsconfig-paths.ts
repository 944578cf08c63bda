/** Reads the path aliases of a project's tsconfig.json (JSON with comments), following its `extends`. */
import { existsSync, readFileSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, isAbsolute, join, resolve } from "node:path";
import { pathToFileURL } from "node:url";

export interface PathAliases {
  exact: Record<string, string[]>;
  patterns: Array<{ prefix: string; suffix: string; targets: string[] }>;
}

/** tsconfig is JSON with comments and trailing commas. */
export function parseJsonc(text: string): unknown {
  let out = "";
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (c === '"') {
      const start = i;
      for (i++; i < text.length && text[i] !== '"'; i++) if (text[i] === "\\") i++;
      out += text.slice(start, i + 1);
    } else if (c === "/" && text[i + 1] === "/") {
      while (i < text.length && text[i] !== "\n") i++;
      out += "\n";
    } else if (c === "/" && text[i + 1] === "*") {
      i = text.indexOf("*/", i + 2);
      if (i === -1) break;
      i++;
    } else out += c;
  }
  return JSON.parse(out.replace(/,(\s*[}\]])/g, "$1")) as unknown;
}

interface TsConfig {
  extends?: string | string[];
  compilerOptions?: { baseUrl?: string; paths?: Record<string, string[]> };
}

/** What a config chain settles, each with the folder its relative paths start from. */
interface Settled {
  baseUrl?: string;
  paths?: { value: Record<string, string[]>; dir: string };
}

const readConfig = (file: string): TsConfig => {
  try {
    const config = parseJsonc(readFileSync(file, "utf8"));
    return typeof config === "object" && config !== null ? config : {};
  } catch (e) {
    throw new Error(`oke: cannot read ${file}: ${e instanceof Error ? e.message : String(e)}`);
  }
};

const isFile = (f: string): boolean => existsSync(f) && statSync(f).isFile();

/**
 * The file an `extends` entry names, as TypeScript finds it: a relative or absolute path
 * (`.json` may be left out), else a package (`@tsconfig/node20/tsconfig.json`, or a package
 * whose package.json names its `tsconfig`, or its tsconfig.json) from node_modules.
 */
function extendedFile(spec: string, fromFile: string): string {
  const dir = dirname(fromFile);
  if (spec.startsWith("./") || spec.startsWith("../") || isAbsolute(spec)) {
    const base = resolve(dir, spec);
    for (const f of [base, `${base}.json`]) if (isFile(f)) return f;
  } else {
    const require = createRequire(resolve(dir, "noop.js"));
    const tryResolve = (s: string): string | undefined => {
      try {
        return require.resolve(s);
      } catch {
        return undefined;
      }
    };
    const pkgJson = tryResolve(`${spec}/package.json`);
    const pkgTsconfig =
      pkgJson === undefined
        ? undefined
        : (JSON.parse(readFileSync(pkgJson, "utf8")) as { tsconfig?: unknown }).tsconfig;
    const found =
      (typeof pkgTsconfig === "string" ? tryResolve(join(dirname(pkgJson!), pkgTsconfig)) : undefined) ??
      (spec.endsWith(".json") ? tryResolve(spec) : undefined) ??
      tryResolve(`${spec}.json`) ??
      tryResolve(`${spec}/tsconfig.json`);
    if (found !== undefined && found.endsWith(".json") && isFile(found)) return found;
  }
  throw new Error(`oke: ${fromFile} extends "${spec}", which cannot be found`);
}

/**
 * `baseUrl` and `paths` of a config after its `extends` (a string or an array, later
 * entries winning, the config itself over all): each is taken whole from the nearest
 * config that sets it, with relative paths from that config's folder, as tsc does.
 */
function settle(file: string, seen: readonly string[]): Settled {
  if (seen.includes(file)) throw new Error(`oke: tsconfig extends itself: ${[...seen, file].join(" → ")}`);
  const config = readConfig(file);
  let out: Settled = {};
  const parents = config.extends === undefined ? [] : [config.extends].flat();
  for (const spec of parents) {
    if (typeof spec !== "string") continue;
    const parent = settle(extendedFile(spec, file), [...seen, file]);
    out = { ...out, ...parent };
  }
  const options = config.compilerOptions ?? {};
  if (typeof options.baseUrl === "string") out.baseUrl = resolve(dirname(file), options.baseUrl);
  if (typeof options.paths === "object" && options.paths !== null)
    out.paths = { value: options.paths, dir: dirname(file) };
  return out;
}

/**
 * `compilerOptions.paths` of `<root>/tsconfig.json` as file URLs, following `extends`
 * (targets are relative to `baseUrl`, else to the tsconfig that declares `paths`).
 */
export function readPathAliases(root: string): PathAliases {
  const aliases: PathAliases = { exact: {}, patterns: [] };
  const file = resolve(root, "tsconfig.json");
  if (!existsSync(file)) return aliases;
  const { baseUrl, paths } = settle(file, []);
  if (paths === undefined) return aliases;
  const base = baseUrl ?? paths.dir;
  for (const [key, targets] of Object.entries(paths.value)) {
    if (!Array.isArray(targets)) continue;
    // A trailing "*" survives pathToFileURL unescaped, so it can be substituted later.
    const urls = targets.map((t) => pathToFileURL(resolve(base, t)).href);
    const star = key.indexOf("*");
    if (star === -1) aliases.exact[key] = urls;
    else aliases.patterns.push({ prefix: key.slice(0, star), suffix: key.slice(star + 1), targets: urls });
  }
  // Longest prefix first, as TypeScript picks the most specific pattern.
  aliases.patterns.sort((a, b) => b.prefix.length - a.prefix.length);
  return aliases;
}
