/**
 * Names and routes that come from the file tree, so `src/flows/trials/start.ts`
 * exporting `start = on(http.post(), flow({...}))` answers `POST /trials/start`
 * as flow `trials.start`. The full rules are in docs/routing.md.
 */

const EXT = /\.(ts|mts|cts|js|mjs|cjs|tsx|jsx)$/;

/** Path segments of a module under src/flows (or src/), without groups, `index` or extension. */
export function unitSegments(modulePath: string): string[] {
  const norm = modulePath.replace(/\\/g, "/").replace(/^\.\//, "");
  const rel = norm.startsWith("src/flows/")
    ? norm.slice("src/flows/".length)
    : norm.startsWith("src/")
      ? norm.slice(4)
      : norm;
  const parts = rel.replace(EXT, "").split("/").filter(Boolean);
  return parts.filter((p, i) => !/^\(.*\)$/.test(p) && !(p === "index" && i === parts.length - 1));
}

/** `[id]` → `:id`, `[...rest]` → `*`. */
const routeSegment = (seg: string): string => {
  const rest = /^\[\.\.\.(\w+)\]$/.exec(seg);
  if (rest) return "*";
  const param = /^\[(\w+)\]$/.exec(seg);
  return param ? `:${param[1]}` : seg;
};

/** Flow names use the segments without brackets: `users/[id]/edit.ts` → `users.id.edit`. */
const nameSegment = (seg: string): string => seg.replace(/^\[(\.\.\.)?(\w+)\]$/, "$2");

const kebab = (s: string): string => s.replace(/([a-z0-9])([A-Z])/g, "$1-$2").toLowerCase();

const isPrimaryExport = (exportName: string, segments: string[]): boolean =>
  exportName === "default" ||
  (segments.length > 0 && kebab(exportName) === kebab(segments[segments.length - 1]!));

/** Default flow name `<unit>.<export>`; the export adds nothing when it repeats the file name or is `default`. */
export function defaultFlowName(modulePath: string, exportName: string): string {
  const segs = unitSegments(modulePath).map(nameSegment);
  if (isPrimaryExport(exportName, segs)) return segs.join(".") || exportName;
  return [...segs, exportName].join(".");
}

/**
 * Route for an HTTP binding without an explicit path. `shared` is true when the
 * same file binds another flow to the same method: then every export but the
 * primary one (named like the file, or `default`) adds `/<export-in-kebab-case>`.
 */
export function fileRoutePath(modulePath: string, exportName: string, shared: boolean): string {
  const segs = unitSegments(modulePath);
  const base = "/" + segs.map(routeSegment).join("/");
  if (!shared || isPrimaryExport(exportName, segs)) return base;
  return (base === "/" ? "" : base) + "/" + kebab(exportName);
}
