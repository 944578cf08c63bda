/** The JSON envelope every HTTP answer uses, and how errors map to status codes. */
import type { LiveStream } from "../signal/live-runtime.ts";
import { errorRecord, isOkeError, OkeError } from "../errors.ts";

/** What the routing core answers; the node and fetch adapters write it out. */
export interface Reply {
  status: number;
  /** JSON text, or undefined for an empty body (204). */
  body: string | undefined;
  /** `Allow` header value for 405. */
  allow?: string;
  /** Ask the adapter to close the connection (413: the rest of the body is never read). */
  close?: boolean;
  /** An Idempotency-Key retry answered from the stored response (`Idempotent-Replayed: true`). */
  replayed?: boolean;
  /** The flow returned fx.live(…): the adapter streams the tape instead (src/http/sse.ts). */
  live?: LiveStream;
  /**
   * A passing refusal (an OkeError with `passing`, e.g. 409 JournalLeaseBusy: the durable run is
   * leased by another holder): an Idempotency-Key is freed rather than answered with it, so a
   * retry asks again.
   */
  passing?: boolean;
  /** Seconds for a `Retry-After` header (503 OKE1504: the store is unavailable; 503 OKE1505: shut down). */
  retryAfter?: number;
  /** The durable run this answer is about: written as the `oke-run-id` header (RUN_ID_HEADER). */
  runId?: string;
}

/**
 * Names the durable run behind an answer, so a client can look the run up (`oke run <id>`, the
 * Console). An okengine header of its own: no `x-` prefix (RFC 6648).
 */
export const RUN_ID_HEADER = "oke-run-id";

export const JSON_CONTENT_TYPE = "application/json; charset=utf-8";

export const NO_CONTENT: Reply = Object.freeze({ status: 204, body: undefined });

/** `{"ok":true,"data":…}`; throws if the value cannot be serialised (the caller turns that into a 500). */
export const okReply = (data: unknown): Reply => ({
  status: 200,
  body: `{"ok":true,"data":${JSON.stringify(data)}}`,
});

export const errorReply = (status: number, error: OkeError, extra?: Record<string, unknown>): Reply => ({
  status,
  body: JSON.stringify({ ok: false, ...extra, error: error.toJSON() }),
});

/** The transport-level errors the HTTP layer raises itself (stable codes, documented in docs/http.md). */
export const httpErrors = {
  malformedJson: (detail: string) =>
    new OkeError({
      code: "OKE1400",
      status: 400,
      message: `Malformed JSON body: ${detail}`,
      fix: "Send a valid JSON document.",
    }),
  notUtf8: () =>
    new OkeError({
      code: "OKE1440",
      status: 400,
      message: "The request body is not valid UTF-8.",
      fix: "Encode JSON bodies as UTF-8.",
    }),
  bodyInterrupted: () =>
    new OkeError({ code: "OKE1400", status: 400, message: "The request body ended before it was complete." }),
  notFound: (method: string, path: string) =>
    new OkeError({
      code: "OKE1404",
      status: 404,
      message: `No route for ${method} ${path}.`,
      fix: "Run `oke routes` to list the routes this app serves.",
    }),
  methodNotAllowed: (method: string, path: string, allowed: readonly string[]) =>
    new OkeError({
      code: "OKE1405",
      status: 405,
      message: `${method} is not allowed on ${path} (allowed: ${allowed.join(", ")}).`,
    }),
  tooLarge: (limit: number) =>
    new OkeError({
      code: "OKE1413",
      status: 413,
      message: `Request body is larger than ${limit} bytes.`,
      fix: "Send a smaller body or raise http.bodyLimit in oke.config.ts.",
    }),
  unsupportedType: (contentType: string) =>
    new OkeError({
      code: "OKE1415",
      status: 415,
      message: `Unsupported content-type "${contentType}": request bodies must be JSON.`,
      fix: 'Send the header "content-type: application/json".',
    }),
  internal: (details?: unknown) =>
    new OkeError({ code: "OKE1500", status: 500, message: "Internal error", details }),
  notReady: () => new OkeError({ code: "OKE1503", status: 503, message: "not ready", passing: true }),
  // Exposed: it names no host or schema, and a client or load balancer must tell it from a bug (500).
  storeUnavailable: () =>
    new OkeError({
      code: "OKE1504",
      status: 503,
      message: "The store is unavailable; try again shortly.",
      fix: "Retry after the Retry-After delay; /_/ready reports store_unavailable until the store is back.",
      expose: true,
      passing: true,
    }),
  /**
   * The shutdown deadline came while this request was still in flight: answered here so the client
   * gets a reply rather than a closed socket. `started`: the flow was invoked; `keyed`: the request
   * carries an Idempotency-Key. Exposed: it names what happened, never a host or a schema.
   */
  shutDown: (what: { durable: boolean; started: boolean; keyed: boolean }) =>
    new OkeError({
      code: "OKE1505",
      status: 503,
      expose: true,
      passing: true,
      message: !what.started
        ? "This instance shut down before the request's flow started; nothing ran."
        : what.durable
          ? "This instance shut down (its shutdownTimeoutMs ran out) before the request's durable run answered; the run is not lost: another instance continues it."
          : "This instance shut down (its shutdownTimeoutMs ran out) before the request's flow answered; it may have done part of its work.",
      fix: !what.started
        ? "Retry: another instance answers it."
        : what.durable
          ? what.keyed
            ? "Retry with the same Idempotency-Key: the retry answers with the run's outcome (a 409 while the run is still running: retry again later)."
            : "A retry without an Idempotency-Key starts another run; send an Idempotency-Key with each request so that a retry answers with this run's outcome."
          : what.keyed
            ? "Retry with the same Idempotency-Key: the flow runs again with the same run id (fx.runId), and its emits are not sent twice."
            : "Retry if the flow is safe to run twice; an Idempotency-Key makes a retry safe.",
    }),
} as const;

/** Retry-After of a 503 OKE1505 (shut down): the load balancer sends the retry to another instance. */
export const SHUTDOWN_RETRY_AFTER_S = 2;

/**
 * Maps anything a flow threw to a reply. An OkeError keeps its status and code;
 * with `hideServerErrors` (prod) its message, fix and details reach the client
 * only when the error is exposed (`error.expose`: 4xx by default) — else the
 * body says "Internal error", as a 5xx's text may name paths, schemas or hosts.
 * Anything else is a bug whose text stays server-side unless `expose`.
 */
export function replyForError(
  e: unknown,
  expose: boolean,
  hideServerErrors = false,
): { reply: Reply; error: OkeError } {
  if (isOkeError(e)) {
    const status = e.status >= 400 && e.status <= 599 ? e.status : 500;
    // A status outside 4xx/5xx becomes a 500 and is hidden like one.
    if (expose || !hideServerErrors || (e.expose && e.status === status))
      return { reply: errorReply(status, e), error: e };
    return {
      reply: {
        status,
        body: JSON.stringify({ ok: false, error: { code: e.code, message: "Internal error" } }),
      },
      error: e,
    };
  }
  const details =
    expose && e instanceof Error
      ? { name: e.name, message: e.message, stack: e.stack }
      : expose
        ? // errorRecord's text never throws: String() does for an object without a prototype.
          { thrown: errorRecord(e).message }
        : undefined;
  const error = httpErrors.internal(details);
  return { reply: errorReply(500, error), error };
}
