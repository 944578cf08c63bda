/** The HTTP core: routes a request, reads its body, invokes the flow, writes the envelope (node:http and fetch). */
import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from "node:http";
import type { HttpRoute, InvokeResult, Readiness, RouteRequest } from "./types.ts";
import { isOkeError, type OkeError } from "../errors.ts";
import type { Logger } from "../log/logger.ts";
import {
  BodyInterrupted,
  isJsonType,
  nodeBody,
  parseJsonBody,
  TOO_LARGE,
  webBody,
  type BodySource,
} from "./body.ts";
import {
  errorReply,
  httpErrors,
  JSON_CONTENT_TYPE,
  NO_CONTENT,
  okReply,
  replyForError,
  RUN_ID_HEADER,
  SHUTDOWN_RETRY_AFTER_S,
  type Reply,
} from "./envelope.ts";
import { newId } from "../id.ts";
import { createRouter, type RouteMatch } from "./router.ts";
import type { SseHub } from "./sse.ts";
import { outageOnce } from "../store/store-health.ts";
import type { Store } from "../store/types.ts";
import { isLiveStream } from "../signal/live-runtime.ts";
import {
  BODY_METHODS,
  checkRequestInput,
  explainMissingBody,
  explainMissingFields,
} from "./request-input.ts";
import {
  createIdempotency,
  DEFAULT_IDEMPOTENCY_WINDOW_MS,
  fingerprintOf,
  IDEMPOTENT_METHODS,
  idempotencyKeyOf,
  type IdempotencyDeps,
} from "./idempotency.ts";

/** The part of App the HTTP layer uses (App satisfies it). */
export interface HttpApp {
  readonly logger: Logger;
  readonly manifest: {
    readonly routes: readonly HttpRoute[];
    /** Which flows are durable: a request cut off at the shutdown deadline says what became of its run. */
    readonly flows?: readonly { readonly name: string; readonly durable: boolean }[];
  };
  /**
   * `runId`: the run id to use — a keyed request's recorded one (see App.invokeRoute), or the one
   * the handler chose for a durable route's request, so that its answer can name the run.
   */
  invokeRoute(route: HttpRoute, request: RouteRequest, options?: { runId?: string }): Promise<InvokeResult>;
  readiness(): Readiness;
  /** Where Idempotency-Key records live; without it (or a clock) the header is ignored. */
  readonly store?: IdempotencyDeps["store"] & Partial<Pick<Store, "health" | "isUnavailable">>;
  readonly clock?: { now(): number };
  readonly config?: { readonly idempotencyWindowMs?: number };
  /** Serves the live streams flows return (fx.live); without it they are written as empty 200s. */
  readonly sse?: SseHub;
}

export interface HttpHandlerOptions {
  /** Largest accepted request body in bytes. */
  bodyLimit: number;
  /**
   * Put the message and stack of unexpected errors in 500 responses (dev only).
   * Over a socket they go to loopback clients only; in-process requests are local.
   */
  exposeErrors: boolean;
  /**
   * Production: an OkeError with a 5xx status (unless made with `expose: true`)
   * answers its code and "Internal error" only — its text may name paths,
   * schemas or hosts. Without it (dev, test) OkeErrors answer their own text.
   */
  hideServerErrors?: boolean;
  /** True once the server shuts down: answers then carry `Connection: close` (set by startHttpServer). */
  isClosing?: () => boolean;
}

export interface HttpHandler {
  /** node:http request listener. */
  handle(req: IncomingMessage, res: ServerResponse): void;
  /** The same routing core for in-process requests (app.request()). */
  fetch(request: Request): Promise<Response>;
  /**
   * Resolves once every keyed answer already sent has been stored (its completion is sent
   * after the answer, see idempotency.ts): the app waits for it before closing the store.
   */
  drain(): Promise<void>;
  /**
   * The shutdown deadline came: every request still in flight is answered now with 503 OKE1505
   * (`Retry-After`, `Connection: close`) instead of a closed socket — over node:http unless its
   * headers were already sent — and its Idempotency-Key lock is lapsed so a retry takes it over.
   * What its flow does later is dropped. Resolves once those answers are written out.
   */
  cutOff(): Promise<void>;
  /**
   * The app is stopping: no Idempotency-Key lock is renewed from here (a request still running past
   * the shutdown deadline lets its lock lapse, as a dead process does); resolves once the key writes
   * already sent, and every keyed answer, are stored.
   */
  stop(): Promise<void>;
}

type HeaderRecord = RouteRequest["headers"];
type Done = (reply: Reply) => void;

/** A request not answered yet: what cutOff() needs to answer it at the shutdown deadline. */
interface InFlight {
  /** The route's flow, once routed. */
  flow: string | undefined;
  /** The flow was invoked (for a keyed request: after its claim). */
  started: boolean;
  keyed: boolean;
  /** Answered (by its flow or by cutOff): a second answer is dropped. */
  settled: boolean;
  /** A durable route's run id, once its flow was invoked: the deadline's 503 names the run too. */
  runId: string | undefined;
  /** Writes the deadline's answer; resolves once it is out (undefined: nothing could be written). */
  cut(): Promise<void> | undefined;
}

const HEALTH = "/_/health";
const READY = "/_/ready";
/** Retry-After of a 503 OKE1504: the store's probe backs off to every 2 s. */
const STORE_RETRY_AFTER_S = 2;
const HEALTH_REPLY: Reply = Object.freeze({ status: 200, body: '{"ok":true,"data":{"status":"alive"}}' });
const READY_REPLY: Reply = Object.freeze({ status: 200, body: '{"ok":true,"data":{"status":"ready"}}' });

/** 127.0.0.0/8 and ::1, also as IPv4-mapped IPv6: the only peers dev shows error internals to. */
const isLoopbackPeer = (req: IncomingMessage): boolean => {
  const a = req.socket.remoteAddress ?? "";
  return a === "::1" || a.startsWith("127.") || a.startsWith("::ffff:127.");
};

// Paths end up in error messages and logs; a client can make them arbitrarily long.
const shortPath = (path: string): string => (path.length > 200 ? `${path.slice(0, 200)}…` : path);

export function createHttpHandler(app: HttpApp, options: HttpHandlerOptions): HttpHandler {
  const router = createRouter(app.manifest.routes);
  const durableFlows = new Set((app.manifest.flows ?? []).filter((f) => f.durable).map((f) => f.name));
  // Requests not answered yet; a Set add and delete per request, read only at the shutdown deadline.
  const open = new Set<InFlight>();
  const track = (cut: InFlight["cut"]): InFlight => {
    const t: InFlight = {
      flow: undefined,
      started: false,
      keyed: false,
      settled: false,
      runId: undefined,
      cut,
    };
    open.add(t);
    return t;
  };
  /** True the first time: the answer goes out; false once cutOff() answered the request. */
  const settle = (t: InFlight): boolean => {
    open.delete(t);
    if (t.settled) return false;
    t.settled = true;
    return true;
  };
  const { bodyLimit, exposeErrors } = options;
  const hideServerErrors = options.hideServerErrors ?? false;

  const fail = (
    method: string,
    path: string,
    status: number,
    error: OkeError,
    cause: unknown,
    extra?: Partial<Reply>,
  ): Reply => {
    logFailure(method, path, status, error, cause);
    return { ...errorReply(status, error), ...extra };
  };

  const logFailure = (
    method: string,
    path: string,
    status: number,
    error: OkeError,
    cause: unknown,
    flow?: string,
  ): void => {
    // The route's flow when one was reached: a durable run's own lines (runId) carry the same name.
    const log = { method, path: shortPath(path), status, code: error.code, ...(flow ? { flow } : {}) };
    if (status >= 500)
      app.logger.error({ ...log, err: cause }, `http ${status} ${method} ${shortPath(path)}`);
    // A 4xx is the client's mistake, not the app's: at info, so a scanner's thousand 404s do not bury
    // the warnings an operator must act on (Fastify logs its 4xx at info too).
    else app.logger.info(log, `http ${status} ${method} ${shortPath(path)}: ${error.message}`);
  };

  const system = (method: string, path: string): Reply => {
    if (method !== "GET" && method !== "HEAD") {
      return fail(method, path, 405, httpErrors.methodNotAllowed(method, path, ["GET"]), undefined, {
        allow: "GET",
      });
    }
    if (path === HEALTH) return HEALTH_REPLY;
    const r = app.readiness();
    if (r.ready) return READY_REPLY;
    const error = httpErrors.notReady();
    // `reason` twice: at the top level for `body.reason`, and inside the error for envelope readers.
    return {
      status: 503,
      body: JSON.stringify({ ok: false, reason: r.reason, error: { ...error.toJSON(), reason: r.reason } }),
    };
  };

  /** What a flow's outcome becomes: 204 for undefined or a park (naming the parked run), else the envelope. */
  const resultReply = (r: InvokeResult): Reply =>
    r.kind === "parked"
      ? { ...NO_CONTENT, runId: r.runId }
      : r.value === undefined
        ? NO_CONTENT
        : isLiveStream(r.value)
          ? { status: 200, body: undefined, live: r.value }
          : okReply(r.value);

  /**
   * `e` is the outage the store knows about: its health is down and the error is one it calls
   * unavailable (a store that cannot classify errors: its health alone). Not a bug: 503, not 500.
   */
  const storeOutage = (e: unknown): boolean => {
    const health = app.store?.health?.();
    if (health === undefined || health.ok) return false;
    return app.store?.isUnavailable?.(e) ?? true;
  };

  /** One warn per store outage for its 503s, the rest at debug. */
  const first503 = outageOnce(app.store);

  const failure = (method: string, path: string, e: unknown, local: boolean, flow?: string): Reply => {
    if (storeOutage(e)) {
      const error = httpErrors.storeUnavailable();
      // One warn line per outage, without a stack, the rest at debug: during an outage every request
      // fails (a full disk answered 26 000 in 13 s, each a line on that disk), and the store logs the
      // outage with its cause, and its end.
      const log = first503() === false ? app.logger.debug : app.logger.warn;
      log.call(
        app.logger,
        {
          method,
          path: shortPath(path),
          status: 503,
          code: error.code,
          ...(flow ? { flow } : {}),
          error: e instanceof Error ? e.message : String(e),
        },
        `http 503 ${method} ${shortPath(path)}: the store is unavailable`,
      );
      return { ...errorReply(503, error), passing: true, retryAfter: STORE_RETRY_AFTER_S };
    }
    if (e instanceof BodyInterrupted) {
      // The client is gone; nobody reads this reply.
      app.logger.debug({ method, path: shortPath(path) }, `http request body interrupted: ${e.message}`);
      return { ...errorReply(400, httpErrors.bodyInterrupted()), close: true };
    }
    // The reply as replyForError built it: it knows what this client may see.
    const { reply, error } = replyForError(e, exposeErrors && local, hideServerErrors);
    logFailure(method, path, reply.status, error, e, flow);
    // A passing refusal (OkeError.passing) must not become an Idempotency-Key's stored answer.
    return isOkeError(e) && e.passing ? { ...reply, passing: true } : reply;
  };

  // Callback style on purpose: one promise hop per request instead of a
  // then/catch chain per layer (each hop is a microtask on the hot path).
  // `done` must not throw; the adapters catch their own errors.
  const idempotency =
    app.store !== undefined && app.clock !== undefined
      ? createIdempotency({
          store: app.store,
          now: () => app.clock!.now(),
          windowMs: app.config?.idempotencyWindowMs ?? DEFAULT_IDEMPOTENCY_WINDOW_MS,
          logger: app.logger,
        })
      : undefined;

  /** Routes a request with an Idempotency-Key through the key's record; others straight to the flow. */
  const invoke = (
    method: string,
    path: string,
    route: HttpRoute,
    request: RouteRequest,
    local: boolean,
    t: InFlight,
    done: Done,
  ): void => {
    let key: string | undefined;
    try {
      key =
        IDEMPOTENT_METHODS.has(method) && idempotency !== undefined
          ? idempotencyKeyOf(request.headers)
          : undefined;
      if (key !== undefined) checkRequestInput(request);
    } catch (e) {
      return done(failure(method, path, e, local));
    }
    const durable = durableFlows.has(route.flow);
    const answer: Done = durable ? (reply) => nameRun(reply, done) : done;
    if (key === undefined || idempotency === undefined)
      // A durable run's id is chosen here rather than by the app, so that every answer about the run
      // can name it (oke-run-id) in its headers, an error's too.
      return invokeFlow(method, path, route, request, local, t, answer, durable ? runIdNow() : undefined);
    t.keyed = true;
    const fingerprint = fingerprintOf(method, `${path}?${JSON.stringify(request.query)}`, request.body);
    idempotency.handle(
      key,
      fingerprint,
      // The input was checked above (before the claim): not walked a second time.
      (runId, finished) => invokeFlow(method, path, route, request, local, t, finished, runId, true),
      answer,
      (e) => failure(method, path, e, local),
      durable,
    );
  };

  /** A fresh run id on the app's clock, as the app would choose it. */
  const runIdNow = (): string => newId(app.clock?.now() ?? Date.now());

  /** `reply` without a run id: the run it would name does not exist (or nobody can tell). */
  const unnamed = (reply: Reply): Reply => {
    const out = { ...reply };
    delete out.runId;
    return out;
  };

  /**
   * Sends a durable route's answer naming its run only where the run exists: a 2xx always (the run
   * returned or parked), an error once the store shows the run — input refused before the run
   * started (a 422) names none. Errors of durable routes only pay this read.
   */
  const nameRun = (reply: Reply, done: Done): void => {
    const { runId } = reply;
    if (runId === undefined || reply.status < 400) return done(reply);
    if (app.store === undefined) return done(unnamed(reply));
    let found: Promise<unknown>;
    try {
      found = app.store.getRun(runId);
    } catch {
      return done(unnamed(reply));
    }
    void found.then(
      (run) => done(run === undefined ? unnamed(reply) : reply),
      () => done(unnamed(reply)),
    );
  };

  const invokeFlow = (
    method: string,
    path: string,
    route: HttpRoute,
    request: RouteRequest,
    local: boolean,
    t: InFlight,
    done: Done,
    runId?: string,
    checked = false,
  ): void => {
    let pending: Promise<InvokeResult>;
    t.started = true;
    // A durable route's answers carry its run id (checked against the store for errors: nameRun).
    const named = runId !== undefined && durableFlows.has(route.flow) ? runId : undefined;
    t.runId = named;
    const failed = (e: unknown): Reply => {
      let explained: unknown = e;
      try {
        explained = explainMissingFields(
          explainMissingBody(e, method, route, request),
          method,
          route,
          request,
        );
      } catch (bug) {
        // Only words added to a refusal: a fault in them must not leave the request unanswered.
        app.logger.error({ err: bug }, "http: explaining a refused request failed; answering it as it was");
      }
      const reply = failure(method, path, explained, local, route.flow);
      // The store is down: nothing can tell whether the run was created, and nobody asks it now.
      return named === undefined || storeOutage(e) ? reply : { ...reply, runId: named };
    };
    try {
      if (!checked) checkRequestInput(request);
      pending =
        runId === undefined ? app.invokeRoute(route, request) : app.invokeRoute(route, request, { runId });
    } catch (e) {
      return done(failed(e));
    }
    void pending.then(
      (result) => {
        let reply: Reply;
        try {
          reply = resultReply(result);
          if (named !== undefined) reply = { ...reply, runId: named };
        } catch (e) {
          reply = failed(e); // e.g. a BigInt in the result
        }
        done(reply);
      },
      (e: unknown) => done(failed(e)),
    );
  };

  const tooLarge = (method: string, path: string): Reply =>
    fail(method, path, 413, httpErrors.tooLarge(bodyLimit), undefined, { close: true });

  const withBody = (
    method: string,
    path: string,
    match: Extract<RouteMatch, { kind: "route" }>,
    headers: HeaderRecord,
    source: BodySource,
    local: boolean,
    t: InFlight,
    done: Done,
  ): void => {
    if (source.contentType !== undefined && !isJsonType(source.contentType)) {
      return done(fail(method, path, 415, httpErrors.unsupportedType(source.contentType), undefined));
    }
    // Content-Length already over the limit: answer without reading a byte.
    if (source.length !== undefined && source.length > bodyLimit) return done(tooLarge(method, path));
    source.read(bodyLimit, (raw) => {
      if (raw === TOO_LARGE) return done(tooLarge(method, path));
      if (raw instanceof BodyInterrupted) return done(failure(method, path, raw, local));
      let body: unknown;
      try {
        body = parseJsonBody(raw);
      } catch (e) {
        return done(failure(method, path, e, local));
      }
      invoke(
        method,
        path,
        match.route,
        { params: match.params, query: match.query, body, headers },
        local,
        t,
        done,
      );
    });
  };

  /**
   * The routing core, shared by both adapters. Health, 404 and 405 are
   * answered at once; the body source is only built for methods that carry a
   * body.
   */
  const dispatch = (
    method: string,
    url: string,
    headers: HeaderRecord,
    body: () => BodySource,
    local: boolean,
    t: InFlight,
    done: Done,
  ): void => {
    const q = url.indexOf("?");
    const path = q === -1 ? url : url.slice(0, q);
    if (path === HEALTH || path === READY) return done(system(method, path));

    const match = router.match(method, url);
    if (match.kind === "none") {
      return done(fail(method, path, 404, httpErrors.notFound(method, shortPath(path)), undefined));
    }
    if (match.kind === "method") {
      const allow = match.allowed.join(", ");
      const error = httpErrors.methodNotAllowed(method, shortPath(path), match.allowed);
      return done(fail(method, path, 405, error, undefined, { allow }));
    }
    t.flow = match.route.flow;
    if (BODY_METHODS.has(method)) {
      const source = body();
      if (source.present) return withBody(method, path, match, headers, source, local, t, done);
    }
    invoke(
      method,
      path,
      match.route,
      { params: match.params, query: match.query, body: undefined, headers },
      local,
      t,
      done,
    );
  };

  /** The deadline's answer for one request, logged once (a warn: the operator's shutdownTimeoutMs ran out). */
  const deadlineReply = (t: InFlight, method: string, path: string): Reply => {
    const durable = t.flow !== undefined && durableFlows.has(t.flow);
    const error = httpErrors.shutDown({ durable, started: t.started, keyed: t.keyed });
    // Its message says the run goes on elsewhere: the header says which one.
    const run = durable && t.started && t.runId !== undefined ? { runId: t.runId } : {};
    app.logger.warn(
      {
        method,
        path: shortPath(path),
        status: 503,
        code: error.code,
        ...(t.flow ? { flow: t.flow } : {}),
        durable,
        keyed: t.keyed,
      },
      `http 503 ${method} ${shortPath(path)}: the shutdown deadline came before its flow answered`,
    );
    return { ...errorReply(503, error), retryAfter: SHUTDOWN_RETRY_AFTER_S, close: true, ...run };
  };

  const writeNode = (res: ServerResponse, reply: Reply): void => {
    const headers: OutgoingHttpHeaders = {};
    if (reply.body !== undefined) {
      headers["content-type"] = JSON_CONTENT_TYPE;
      headers["content-length"] = Buffer.byteLength(reply.body);
    }
    if (reply.allow !== undefined) headers.allow = reply.allow;
    if (reply.replayed) headers["idempotent-replayed"] = "true";
    if (reply.retryAfter !== undefined) headers["retry-after"] = String(reply.retryAfter);
    if (reply.runId !== undefined) headers[RUN_ID_HEADER] = reply.runId;
    // During a graceful shutdown every answer also ends its connection.
    if (reply.close || options.isClosing?.()) headers.connection = "close";
    res.writeHead(reply.status, headers);
    res.end(reply.body);
  };

  const fatal = (req: IncomingMessage, res: ServerResponse, e: unknown): void => {
    app.logger.error(
      { err: e, method: req.method, path: shortPath(req.url ?? "") },
      "http: failed to answer a request",
    );
    try {
      if (res.headersSent) res.destroy();
      else
        writeNode(res, {
          ...replyForError(e, exposeErrors && isLoopbackPeer(req), hideServerErrors).reply,
          close: true,
        });
    } catch {
      res.destroy();
    }
  };

  return {
    cutOff() {
      // First: a flow that answers while the 503s go out must find its key lapsed, not store.
      idempotency?.abandon();
      const written: Array<Promise<void>> = [];
      for (const t of [...open]) {
        if (!settle(t)) continue;
        const out = t.cut();
        if (out !== undefined) written.push(out);
      }
      return Promise.all(written).then(() => undefined);
    },
    drain: () => idempotency?.drain() ?? Promise.resolve(),
    stop: () => idempotency?.stop() ?? Promise.resolve(),
    handle(req, res) {
      // Inline callbacks, not named closures: see the note in body.ts.
      const t = track(() => {
        // Headers already out (a stream, an answer being written): the socket is closed as it is.
        if (res.headersSent || res.destroyed) return undefined;
        const written = new Promise<void>((resolve) => {
          res.once("finish", resolve);
          res.once("close", resolve);
        });
        try {
          writeNode(res, deadlineReply(t, req.method ?? "GET", (req.url ?? "/").split("?")[0]!));
        } catch (e) {
          fatal(req, res, e);
        }
        return written;
      });
      try {
        dispatch(
          req.method ?? "GET",
          req.url ?? "/",
          req.headers,
          () => nodeBody(req),
          exposeErrors && isLoopbackPeer(req),
          t,
          (reply) => {
            if (!settle(t)) return;
            try {
              if (reply.live && app.sse) app.sse.serve(req, res, reply.live);
              else writeNode(res, reply);
            } catch (e) {
              fatal(req, res, e);
            }
          },
        );
      } catch (e) {
        settle(t);
        fatal(req, res, e);
      }
    },

    async fetch(request) {
      const url = new URL(request.url);
      const headers: HeaderRecord = {};
      request.headers.forEach((value, key) => {
        headers[key] = value;
      });
      const reply = await new Promise<Reply>((resolve) => {
        const t = track(() => {
          resolve(deadlineReply(t, request.method, url.pathname));
          return undefined;
        });
        dispatch(
          request.method,
          url.pathname + url.search,
          headers,
          () => webBody(request),
          true,
          t,
          (r) => {
            if (settle(t)) resolve(r);
          },
        );
      });
      if (reply.live) {
        // A live tape streams for as long as the client stays; in-process requests have no client to stay.
        const body = JSON.stringify({
          ok: false,
          error: {
            code: "OKE1473",
            message: "A live stream (fx.live) is served over HTTP only: app.start()",
          },
        });
        return new Response(body, { status: 501, headers: { "content-type": JSON_CONTENT_TYPE } });
      }
      const out = new Headers();
      if (reply.body !== undefined) out.set("content-type", JSON_CONTENT_TYPE);
      if (reply.allow !== undefined) out.set("allow", reply.allow);
      if (reply.replayed) out.set("idempotent-replayed", "true");
      if (reply.retryAfter !== undefined) out.set("retry-after", String(reply.retryAfter));
      if (reply.runId !== undefined) out.set(RUN_ID_HEADER, reply.runId);
      return new Response(request.method === "HEAD" ? null : (reply.body ?? null), {
        status: reply.status,
        headers: out,
      });
    },
  };
}
