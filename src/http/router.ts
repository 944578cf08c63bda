/** find-my-way over the manifest's routes: a match, a 405 with the allowed methods, or none. */
import FindMyWay from "find-my-way";
import type { HttpRoute } from "./types.ts";

export type RouteMatch =
  | {
      kind: "route";
      route: HttpRoute;
      params: Record<string, string>;
      query: Record<string, string | string[]>;
    }
  | { kind: "method"; allowed: string[] }
  | { kind: "none" };

export interface Router {
  match(method: string, url: string): RouteMatch;
}

const noop = (): void => {};

/**
 * The routing table, built once from the manifest. find-my-way also splits and
 * parses the query string (fast-querystring: repeated keys become arrays, the
 * record has no prototype), so a request is scanned once.
 */
export function createRouter(routes: readonly HttpRoute[]): Router {
  // find-my-way matches no route when a parameter passes 100 characters (its default): a 404 "No
  // route for GET /files/…" to a long id or token. A parameter is as long as the request line
  // allows (Node's 16 KiB header limit, a 431 above it).
  const fmw = FindMyWay({ ignoreTrailingSlash: true, ignoreDuplicateSlashes: true, maxParamLength: 16_384 });
  const methods = new Set<string>();
  for (const route of routes) {
    try {
      fmw.on(route.method, route.path, noop, route);
    } catch (e) {
      throw new Error(
        `http: cannot register ${route.method} ${route.path} (flow "${route.flow}"): ${e instanceof Error ? e.message : String(e)}`,
      );
    }
    methods.add(route.method);
  }
  const known = [...methods].sort();

  return {
    match(method, url) {
      // HEAD is answered by the GET route (node drops the body).
      const m = method === "HEAD" ? "GET" : method;
      const found = methods.has(m) ? fmw.find(m as FindMyWay.HTTPMethod, url) : null;
      if (found !== null) {
        // fast-querystring turns repeated keys into arrays, whatever find-my-way's typings say.
        const query: Record<string, string | string[]> = found.searchParams;
        return {
          kind: "route",
          route: found.store as HttpRoute,
          params: found.params as Record<string, string>,
          query,
        };
      }
      // Miss path only: which other methods would have matched, for 405 + Allow.
      const allowed = known.filter((k) => k !== m && fmw.find(k as FindMyWay.HTTPMethod, url) !== null);
      return allowed.length > 0 ? { kind: "method", allowed } : { kind: "none" };
    },
  };
}
