/** The shapes the HTTP layer and the app agree on: a route, a routed request, readiness. */
import type { HttpMethod } from "../flow/http-trigger.ts";

export type { InvokeResult } from "../flow/flow.ts";

/** What an HTTP request becomes once routed. */
export interface RouteRequest {
  params: Record<string, string>;
  query: Record<string, string | string[]>;
  /** Parsed JSON body (undefined when empty). */
  body: unknown;
  headers: Record<string, string | string[] | undefined>;
}

export interface HttpRoute {
  method: HttpMethod;
  /** find-my-way syntax: "/trials/start", "/users/:id". */
  path: string;
  flow: string;
}

export type Readiness = { ready: true } | { ready: false; reason: string };
