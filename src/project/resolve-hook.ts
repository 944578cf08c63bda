/** Node resolve hook for a loaded project: the @/ alias, okengine itself, and tsconfig paths. */
/**
 * Module resolution for a loaded project, run in Node's hooks thread after
 * tsx's own hooks are registered (tsx then turns the mapped file URLs into
 * TypeScript modules, extensionless or not).
 *
 * - `@/x` → `<project>/src/x`, with or without a tsconfig.
 * - `okengine` / `okengine/testing` → this package's own sources, so the
 *   project and the CLI share ONE instance of every module (a second copy
 *   would make `instanceof OkeError` false and split the registries).
 * - other `compilerOptions.paths` entries of `<project>/tsconfig.json`.
 */

export interface ResolveHookData {
  /** file URL of `<project>/src/` (trailing slash). */
  srcUrl: string;
  /** Bare specifier → file URLs to try in order. */
  exact: Record<string, string[]>;
  /** `prefix*suffix` patterns from tsconfig paths, with their file-URL substitutions. */
  patterns: Array<{ prefix: string; suffix: string; targets: string[] }>;
}

interface ResolveContext {
  parentURL?: string;
  conditions: string[];
  importAttributes: Record<string, string>;
}
interface ResolveResult {
  url: string;
  format?: string | null;
  shortCircuit?: boolean;
}
type NextResolve = (specifier: string, context?: ResolveContext) => Promise<ResolveResult>;

let data: ResolveHookData | undefined;

export function initialize(d: ResolveHookData): void {
  data = d;
}

const firstResolving = async (
  targets: readonly string[],
  context: ResolveContext,
  next: NextResolve,
): Promise<ResolveResult | undefined> => {
  let lastError: unknown;
  for (const t of targets) {
    try {
      return await next(t, context);
    } catch (e) {
      lastError = e;
    }
  }
  if (lastError !== undefined) throw lastError;
  return undefined;
};

export async function resolve(
  specifier: string,
  context: ResolveContext,
  next: NextResolve,
): Promise<ResolveResult> {
  if (
    data === undefined ||
    specifier.startsWith(".") ||
    specifier.startsWith("/") ||
    specifier.includes(":")
  ) {
    return next(specifier, context);
  }
  const exact = data.exact[specifier];
  if (exact !== undefined) return (await firstResolving(exact, context, next)) ?? next(specifier, context);
  if (specifier.startsWith("@/")) return next(new URL(specifier.slice(2), data.srcUrl).href, context);
  for (const p of data.patterns) {
    if (
      specifier.length >= p.prefix.length + p.suffix.length &&
      specifier.startsWith(p.prefix) &&
      specifier.endsWith(p.suffix)
    ) {
      const star = specifier.slice(p.prefix.length, specifier.length - p.suffix.length);
      const found = await firstResolving(
        p.targets.map((t) => t.replace("*", star)),
        context,
        next,
      );
      if (found) return found;
    }
  }
  return next(specifier, context);
}
