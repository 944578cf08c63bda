/** Routes and default flow names from a file's place under src/flows/ (docs/routing.md has the table). */

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

/** `[id]` → `:id`, `[...slug]` → `*`. */
const routeSegment = (seg: string): string => {
  if (/^\[\.\.\.\w+\]$/.test(seg)) return "*";
  const param = /^\[(\w+)\]$/.exec(seg);
  return param ? `:${param[1]}` : seg;
};

/**
 * Route of an HTTP binding without an explicit path, or undefined when the
 * file is never a route (see isRouteFile). `(group)` folders, a first folder
 * named `main` and the SILENT_LEAVES add no segment.
 */
export function fileRoutePath(modulePath: string): string | undefined {
  if (!isRouteFile(modulePath)) return undefined;
  const { folders, leaf } = placeOf(modulePath);
  const dirs = folders.filter((f) => !isGroup(f));
  if (dirs[0] === "main") dirs.shift();
  const segs = isGroup(leaf) || SILENT_LEAVES.has(leaf) ? dirs : [...dirs, leaf];
  return "/" + segs.map(routeSegment).join("/");
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
