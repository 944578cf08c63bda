/** okengine/vitest: a vitest plugin that makes a test see the project the way `oke` does. */
/**
 * `okengine/vitest`: a Vite/vitest plugin that makes a test see the project the way `oke` does.
 *
 * ```ts
 * // vitest.config.ts
 * import { defineConfig } from "vitest/config";
 * import { okengine } from "okengine/vitest";
 * export default defineConfig({ plugins: [okengine()] });
 * ```
 *
 * - `@/x` resolves to `<root>/src/x`, and the other `compilerOptions.paths` of `<root>/tsconfig.json` too
 *   (also those it inherits through `extends`);
 * - okengine itself is processed by vitest rather than loaded natively, so `createTestApp({ project })`
 *   imports the project's files through vitest: the test file and the app share one instance of every
 *   module (a signal imported in the test is the signal the app adopted).
 */
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { readPathAliases } from "./project/tsconfig-paths.ts";

export interface OkenginePluginOptions {
  /** The project directory (holding src/ and oke.config.ts), relative to vitest's root. Default: vitest's root. */
  root?: string;
}

/** One resolve alias as Vite takes it. */
export interface OkengineAlias {
  find: RegExp;
  replacement: string;
}

/** The part of Vite's config this plugin reads: vitest's root is `test.root`, else `root`, else the current directory. */
export interface OkengineUserConfig {
  root?: string;
  test?: { root?: string };
}

/** The part of a Vite plugin this one uses (typed here so okengine does not depend on Vite). */
export interface OkenginePlugin {
  name: "okengine";
  config(config?: OkengineUserConfig): {
    resolve: { alias: OkengineAlias[] };
    test: { server: { deps: { inline: RegExp[] } }; env: Record<string, string> };
  };
}

const escape = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/** `@/` and the project's tsconfig `paths`, as Vite aliases (first target of each entry). */
export function projectAliases(root: string): OkengineAlias[] {
  const dir = resolve(root);
  const paths = readPathAliases(dir);
  const aliases: OkengineAlias[] = [];
  for (const [key, targets] of Object.entries(paths.exact)) {
    if (targets[0] !== undefined && key !== "okengine" && !key.startsWith("okengine/"))
      aliases.push({ find: new RegExp(`^${escape(key)}$`), replacement: fileURLToPath(targets[0]) });
  }
  for (const p of paths.patterns) {
    if (p.targets[0] === undefined || p.prefix === "@/") continue;
    const [before, after] = fileURLToPath(p.targets[0].replace("*", "__STAR__")).split("__STAR__");
    aliases.push({
      find: new RegExp(`^${escape(p.prefix)}(.*)${escape(p.suffix)}$`),
      replacement: `${before ?? ""}$1${after ?? ""}`,
    });
  }
  aliases.push({ find: /^@\/(.*)$/, replacement: `${resolve(dir, "src")}/$1` });
  return aliases;
}

/** The vitest plugin: `plugins: [okengine()]`. */
export function okengine(options: OkenginePluginOptions = {}): OkenginePlugin {
  return {
    name: "okengine",
    config: (config = {}) => {
      // Paths are read against vitest's root, as vitest reads its own (`vitest --root app` from
      // anywhere), not against the directory the command was started from.
      const vitestRoot = resolve(config.test?.root ?? config.root ?? ".");
      const root = resolve(vitestRoot, options.root ?? ".");
      return {
        resolve: { alias: projectAliases(root) },
        test: {
          server: { deps: { inline: [/[\\/]node_modules[\\/]okengine[\\/]/, /^okengine(\/|$)/] } },
          // Tells createTestApp({ project }) to import through vitest instead of Node's module
          // hooks, and what a relative `project` is relative to.
          env: { OKE_VITEST_PLUGIN: "1", OKE_VITEST_ROOT: vitestRoot },
        },
      };
    },
  };
}
