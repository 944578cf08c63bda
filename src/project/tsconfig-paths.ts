/** Reads the path aliases of a project's tsconfig.json (JSON with comments). */
import { existsSync, readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
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

/**
 * `compilerOptions.paths` of `<root>/tsconfig.json` as file URLs (targets are
 * relative to `baseUrl`, else to the tsconfig's folder). `extends` is not
 * followed: aliases belong in the project's own tsconfig.
 */
export function readPathAliases(root: string): PathAliases {
  const aliases: PathAliases = { exact: {}, patterns: [] };
  const file = resolve(root, "tsconfig.json");
  if (!existsSync(file)) return aliases;
  let config: { compilerOptions?: { baseUrl?: string; paths?: Record<string, string[]> } };
  try {
    config = parseJsonc(readFileSync(file, "utf8")) as typeof config;
  } catch (e) {
    throw new Error(`oke: cannot read ${file}: ${e instanceof Error ? e.message : String(e)}`);
  }
  const base = resolve(dirname(file), config.compilerOptions?.baseUrl ?? ".");
  for (const [key, targets] of Object.entries(config.compilerOptions?.paths ?? {})) {
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
