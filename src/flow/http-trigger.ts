/** http.get/post/…: HTTP triggers a flow can be bound to. */
import type { Schema } from "../schema.ts";
import { isSchema } from "../schema.ts";

export type HttpMethod = "GET" | "POST" | "PUT" | "PATCH" | "DELETE";

export interface HttpTrigger<I = unknown> {
  readonly kind: "http";
  readonly method: HttpMethod;
  /** Explicit path; when undefined the route comes from the file's place under src/flows. */
  readonly path: string | undefined;
  /** Input contract; the flow's own `in` takes precedence when both are set. */
  readonly in: Schema<I> | undefined;
  readonly __input?: I;
}

export interface HttpTriggerOptions<I> {
  path?: string;
  in?: Schema<I>;
}

/**
 * A trigger without `in`: it names no input type (no `__input`), so `on()` takes the input type from
 * the flow, and a flow with its own `in` keeps it in the binding.
 */
export interface BareHttpTrigger extends Omit<HttpTrigger, "in" | "__input"> {
  readonly in: undefined;
}

/** One http.* helper: with an `in` schema it types the flow's input; without, the flow does. */
export interface HttpTriggerFactory {
  <I>(options: { path?: string; in: Schema<I> }): HttpTrigger<I>;
  (arg?: string | { path?: string; in?: undefined }): BareHttpTrigger;
}

function make(method: HttpMethod): HttpTriggerFactory {
  const trigger = <I = unknown>(arg?: string | HttpTriggerOptions<I>): HttpTrigger<I> => {
    const where = `http.${method.toLowerCase()}()`;
    const opts: HttpTriggerOptions<I> = typeof arg === "string" ? { path: arg } : (arg ?? {});
    if (typeof opts !== "object" || opts === null)
      throw new TypeError(`${where}: expected a path or { path, in }`);
    for (const k of Object.keys(opts)) {
      if (k !== "path" && k !== "in") throw new TypeError(`${where}: unknown option "${k}"`);
    }
    if (opts.path !== undefined && (typeof opts.path !== "string" || !opts.path.startsWith("/"))) {
      throw new TypeError(`${where}: path must start with "/", got ${JSON.stringify(opts.path)}`);
    }
    if (opts.in !== undefined && !isSchema(opts.in))
      throw new TypeError(`${where}: in must be a Standard Schema`);
    return Object.freeze({ kind: "http", method, path: opts.path, in: opts.in });
  };
  // A BareHttpTrigger is an HttpTrigger whose `in` is undefined: the overloads only split the typing.
  return trigger as HttpTriggerFactory;
}

/** HTTP triggers. With no path, the route is derived from the file tree (docs/http.md). */
export const http = {
  get: make("GET"),
  post: make("POST"),
  put: make("PUT"),
  patch: make("PATCH"),
  delete: make("DELETE"),
} as const;

export const isHttpTrigger = (v: unknown): v is HttpTrigger =>
  typeof v === "object" && v !== null && (v as { kind?: unknown }).kind === "http";
