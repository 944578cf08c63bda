/** Routes and default flow names from a file's place under src/flows/ (docs/routing.md has the table). */
import { OkeError } from "../errors.ts";

const EXT = /\.(ts|mts|cts|js|mjs|cjs|tsx|jsx)$/;

/** Leaves that name the action, not a resource: `orders/create.ts` + `http.post()` is `POST /orders`. */
export const SILENT_LEAVES: ReadonlySet<string> = new Set([
  "list",
  "create",
  "get",
  "update",
  "remove",
  "index",
  "route",
]);

/** Files that sit among flows but hold their shapes, signals or generated code: never routes. */
export const ROUTELESS_FILES: ReadonlySet<string> = new Set(["shapes", "signals", "generated"]);

const isGroup = (seg: string): boolean => /^\(.*\)$/.test(seg);

interface Place {
  /** Folders below src/flows/ (or src/ for modules elsewhere), groups included. */
  folders: string[];
  /** File name without extension. */
  leaf: string;
}

function placeOf(modulePath: string): Place {
  const norm = modulePath.replace(/\\/g, "/").replace(/^\.\//, "");
  const rel = norm.startsWith("src/flows/")
    ? norm.slice("src/flows/".length)
    : norm.startsWith("src/")
      ? norm.slice(4)
      : norm;
  const parts = rel.replace(EXT, "").split("/").filter(Boolean);
  return { folders: parts.slice(0, -1), leaf: parts[parts.length - 1] ?? "" };
}

/** False for `_`-prefixed files or folders and for shapes.ts, signals.ts, generated.ts. */
export function isRouteFile(modulePath: string): boolean {
  const { folders, leaf } = placeOf(modulePath);
  return !ROUTELESS_FILES.has(leaf) && ![...folders, leaf].some((seg) => seg.startsWith("_"));
}

/** `[id]`, `[...slug]`: a parameter name is a JavaScript identifier, so it is also an input field. */
const PARAM = /^\[([A-Za-z_$][\w$]*)\]$/;
const REST = /^\[\.\.\.([A-Za-z_$][\w$]*)\]$/;

/** Why a file cannot be a route: a bracket name that is not an identifier, or a catch-all before the end. */
const badPlace = (modulePath: string, message: string, fix: string): OkeError =>
  new OkeError({
    code: "OKE1083",
    message: `Cannot derive a route from ${modulePath}: ${message}`,
    fix,
    details: { file: modulePath },
  });

/** `[id]` → `:id`, `[...slug]` → `*` (the router's catch-all; restParamOf gives its name). */
const routeSegment = (modulePath: string, seg: string, last: boolean): string => {
  const rest = REST.exec(seg);
  if (rest) {
    if (!last)
      throw badPlace(
        modulePath,
        `the catch-all "${seg}" matches the rest of the path, so nothing can follow it.`,
        `Make it the last part of the path (${seg}.ts, or ${seg}/get.ts), or give the binding an explicit path.`,
      );
    return "*";
  }
  const param = PARAM.exec(seg);
  if (param) return `:${param[1]}`;
  if (seg.includes("[") || seg.includes("]")) {
    const inner = seg.replace(/^\[(\.\.\.)?|\]$/g, "");
    const suggestion = inner.replace(/[^\w$]+(.)?/g, (_, c: string | undefined) => (c ?? "").toUpperCase());
    throw badPlace(
      modulePath,
      `"${seg}" is not a path parameter: a parameter's name becomes a field of the flow's input, so it must be an identifier (letters, digits, _ and $).`,
      `Rename it, e.g. [${/^[A-Za-z_$]/.test(suggestion) ? suggestion : "id"}], or give the binding an explicit path.`,
    );
  }
  return seg;
};

/**
 * Route of an HTTP binding without an explicit path, or undefined when the
 * file is never a route (see isRouteFile). `(group)` folders, a first folder
 * named `main` and the SILENT_LEAVES add no segment. Throws OKE1083 for a
 * bracket name that is not an identifier (`[user-id]`) and for a catch-all
 * that is not last (`files/[...path]/meta.ts`).
 */
export function fileRoutePath(modulePath: string): string | undefined {
  if (!isRouteFile(modulePath)) return undefined;
  const { folders, leaf } = placeOf(modulePath);
  const dirs = folders.filter((f) => !isGroup(f));
  if (dirs[0] === "main") dirs.shift();
  const segs = isGroup(leaf) || SILENT_LEAVES.has(leaf) ? dirs : [...dirs, leaf];
  return "/" + segs.map((seg, i) => routeSegment(modulePath, seg, i === segs.length - 1)).join("/");
}

/**
 * The name of the catch-all of a file's route (`files/[...slug].ts` → `slug`),
 * or undefined. The router reports the rest of the path as the parameter `*`;
 * namedParams renames it.
 */
export function restParamOf(modulePath: string): string | undefined {
  if (!isRouteFile(modulePath)) return undefined;
  const { folders, leaf } = placeOf(modulePath);
  for (const seg of [...folders, leaf]) {
    const rest = REST.exec(seg);
    if (rest) return rest[1];
  }
  return undefined;
}

/**
 * Route parameters as the flow sees them: the router's `*` renamed to the
 * catch-all's name (`{ "*": "a/b" }` → `{ slug: "a/b" }`). Without a name, unchanged.
 */
export function namedParams(
  params: Record<string, string>,
  restParam: string | undefined,
): Record<string, string> {
  if (restParam === undefined || !("*" in params)) return params;
  const { "*": rest, ...named } = params;
  return { ...named, [restParam]: rest };
}

/** The unit: first folder under src/flows/ that is not a group, brackets dropped; undefined at the top. */
export function unitOf(modulePath: string): string | undefined {
  const first = placeOf(modulePath).folders.find((f) => !isGroup(f));
  return first?.replace(/^\[(\.\.\.)?(\w+)\]$/, "$2");
}

/**
 * Default flow name `<unit>.<export>` (`src/flows/ops/email-dlq.ts` exporting
 * `list` → `ops.list`); a file directly under src/flows/ has no unit, so the
 * name is the export. A default export takes the file's name instead.
 */
export function defaultFlowName(modulePath: string, exportName: string): string {
  const name =
    exportName === "default" ? placeOf(modulePath).leaf.replace(/^\[(\.\.\.)?(\w+)\]$/, "$2") : exportName;
  const unit = unitOf(modulePath);
  return unit === undefined ? name : `${unit}.${name}`;
}
