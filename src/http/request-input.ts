// What a routed request may carry into a flow: the store's limits on its body, path and query, and how the three merge into the flow's input.
import { FlowInputError, OkeError } from "../errors.ts";
import { checkStorable } from "../signal/storable.ts";
import type { HttpRoute, RouteRequest } from "./types.ts";

/** The methods whose body is read; a GET's or DELETE's body is not. */
export const BODY_METHODS: ReadonlySet<string> = new Set(["POST", "PUT", "PATCH"]);

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

/**
 * A request without a body (none, or an empty one) and without path or query fields gives its flow
 * the input `undefined`; when the route's `in` refuses it, the validator's text ("expected object,
 * received undefined") does not say what the client got wrong. The 422 OKE1422 then says so, its
 * details (the validator's issues) kept. Anything else, including a 422 that a callee's input
 * raised inside the flow, is returned as it is.
 */
export function explainMissingBody(
  e: unknown,
  method: string,
  route: HttpRoute,
  request: RouteRequest,
): unknown {
  // The route's own input check (fx/execute.ts checkInput), not a callee's.
  if (!(e instanceof FlowInputError) || e.flow !== route.flow || request.body !== undefined) return e;
  if (!BODY_METHODS.has(method)) return e;
  if (Object.keys(request.params).length > 0 || Object.keys(request.query).length > 0) return e;
  return new OkeError({
    code: e.code,
    status: e.status,
    message: `The request has no body; this route (${route.method} ${route.path}) expects a JSON body (content-type: application/json).`,
    fix: 'Send the input as a JSON body with "content-type: application/json"; details lists what the schema asks for.',
    details: e.details,
    cause: e,
  });
}

/**
 * The route's own schema refused fields the request does not carry at all (not in the path, the query
 * or the body): the validator's words ("noteId: expected string, received undefined") say nothing of
 * where to send them. The fix says so and, when the path gives parameters, that one of them may be the
 * field under another name (`[id]/get.ts` beside `in: z.object({ noteId })`, a mistake tsc cannot see).
 */
export function explainMissingFields(
  e: unknown,
  method: string,
  route: HttpRoute,
  request: RouteRequest,
): unknown {
  // The route's own input check (fx/execute.ts checkInput), not a callee's, and not explained already.
  if (!(e instanceof FlowInputError) || e.flow !== route.flow || e.fix !== undefined) return e;
  if (!Array.isArray(e.details)) return e;
  const params = Object.keys(request.params);
  const given = new Set([...params, ...Object.keys(request.query), ...objectKeys(request.body)]);
  const missing = [
    ...new Set(
      (e.details as Array<{ path?: unknown }>)
        .map((i) => (typeof i.path === "string" ? i.path.split(".")[0]! : ""))
        .filter((k) => k !== "" && !given.has(k)),
    ),
  ];
  if (missing.length === 0) return e;
  const names = (xs: readonly string[]): string => xs.map((x) => `"${x}"`).join(", ");
  const where = BODY_METHODS.has(method) ? "the JSON body or the query string" : "the query string";
  return new OkeError({
    code: e.code,
    status: e.status,
    message: e.message,
    fix:
      `The request carries no ${names(missing)}` +
      (params.length === 0
        ? ""
        : `; this route's path (${route.method} ${route.path}) gives ${names(params)}: if ${missing.length === 1 ? "it is" : "one of them is"} meant to be the same field, give them the same name (the file's [name] or :name, or the schema's field)`) +
      `. Otherwise send ${missing.length === 1 ? "it" : "them"} in ${where}.`,
    details: e.details,
    cause: e,
  });
}

const objectKeys = (v: unknown): string[] =>
  typeof v === "object" && v !== null && !Array.isArray(v) ? Object.keys(v) : [];

const show = (v: unknown): string => {
  const s = typeof v === "string" ? JSON.stringify(v) : (JSON.stringify(v) ?? String(v));
  return s.length > 60 ? `${s.slice(0, 60)}…` : s;
};

/** A field given twice with different values: the client meant one of them, and guessing is a bug. */
const conflict = (field: string, a: string, av: unknown, b: string, bv: unknown): OkeError =>
  new OkeError({
    code: "OKE1424",
    status: 422,
    message: `Field "${field}" is given by the ${a} (${show(av)}) and by the ${b} (${show(bv)}).`,
    fix: `Send "${field}" once (path parameters win), or send the same value in both places.`,
    details: [{ path: field, message: `${a} and ${b} disagree` }],
  });

const urlFieldsWithScalarBody = (): OkeError =>
  new OkeError({
    code: "OKE1425",
    status: 422,
    message:
      "The body is not a JSON object, so the path parameters and query fields of this request cannot be merged into it.",
    fix: "Send an object body, e.g. { items: [...] }, or move the fields into it.",
  });

// A path parameter "42" and a body/query number 42 are the same field (clients send ids as numbers).
const same = (param: string, v: unknown): boolean =>
  v === param || (typeof v === "number" && String(v) === param);

/**
 * The flow's input from a routed request. Path parameters win: a body or query
 * field of the same name must carry the same value, else 422 OKE1424 naming it;
 * a body field and a query field of the same name must agree too. The path
 * value is the one the flow sees. An object body is merged with the URL's
 * fields; a non-object body is the input only when the URL carries none
 * (OKE1425 otherwise, as they would be lost). No body and no URL fields:
 * undefined.
 */
export function routeInput(request: RouteRequest): unknown {
  const { params, query, body } = request;
  const paramNames = Object.keys(params);
  const queryNames = Object.keys(query);
  if (body !== undefined && (typeof body !== "object" || body === null || Array.isArray(body))) {
    if (paramNames.length > 0 || queryNames.length > 0) throw urlFieldsWithScalarBody();
    return body;
  }
  const fromBody = body as Record<string, unknown> | undefined;
  if (fromBody === undefined && paramNames.length === 0 && queryNames.length === 0) return undefined;
  // Null prototype: a "__proto__" field is data, never the object's prototype.
  const input: Record<string, unknown> = Object.create(null) as Record<string, unknown>;
  for (const k of queryNames) input[k] = query[k];
  if (fromBody !== undefined) {
    for (const k of Object.keys(fromBody)) {
      const v = fromBody[k];
      if (k in input && JSON.stringify(input[k]) !== JSON.stringify(v) && !same(String(input[k]), v))
        throw conflict(k, "query string", input[k], "body", v);
      input[k] = v;
    }
  }
  for (const k of paramNames) {
    const p = params[k]!;
    if (k in input && !same(p, input[k]))
      throw conflict(
        k,
        "path",
        p,
        fromBody !== undefined && k in fromBody ? "body" : "query string",
        input[k],
      );
    input[k] = p;
  }
  return { ...input };
}
