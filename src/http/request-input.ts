// What a routed request may carry into a flow: the store's limits on its body, path and query, and how the three merge into the flow's input.
import { checkStorable } from "../signal/storable.ts";
import type { RouteRequest } from "../app/types.ts";

/**
 * Refuses (422, OKE1252/OKE1255/OKE1256) a body, path parameter or query value
 * that no store could hold — it may become a durable run's input or an emit —
 * before the flow runs. Size is bounded by http.bodyLimit already.
 */
export function checkRequestInput(request: RouteRequest): void {
  if (request.body !== undefined) checkStorable(request.body, "request body");
  checkStorable(request.params, "path parameter");
  checkStorable(request.query, "query string");
}
