/** startHttpServer: node:http around the handler, with timeouts and a graceful close. */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { applyClientLimits, DEFAULT_LIMITS, serverOptions, type HttpLimits } from "./client-limits.ts";
import { createHttpHandler, type HttpApp } from "./handler.ts";
import type { StreamCount } from "./sse.ts";

/** At the shutdown deadline, how long the 503s for requests in flight may take to go out before every socket is cut. */
const ANSWER_FLUSH_MS = 1_000;

export interface HttpServerOptions {
  port: number;
  host?: string;
  bodyLimit: number;
  exposeErrors: boolean;
  /** See HttpHandlerOptions.hideServerErrors. */
  hideServerErrors?: boolean;
  /** Timeouts and the connection cap. Default: DEFAULT_LIMITS. */
  limits?: HttpLimits;
  /** Open SSE streams: their sockets are not counted against `limits.maxConnections`. */
  streams?: StreamCount;
}

export interface HttpServer {
  /** The bound port (useful with `port: 0`). */
  port: number;
  /** The bound address as the socket reports it (`127.0.0.1`, `::`, `0.0.0.0` …). */
  host: string;
  /**
   * Stops accepting, lets in-flight requests finish, then closes the idle
   * keep-alive sockets. After `timeoutMs` (default: no deadline) the requests
   * still in flight are answered 503 OKE1505 (HttpHandler.cutOff) and the
   * remaining connections are cut. Resolves once the keyed answers sent are stored too.
   */
  close(options?: { timeoutMs?: number }): Promise<void>;
  /** Resolves once every keyed answer sent has been stored (HttpHandler.drain). */
  drain(): Promise<void>;
  /** Ends Idempotency-Key lock renewals and waits for the key writes sent (HttpHandler.stop). */
  stop(): Promise<void>;
}

export async function startHttpServer(app: HttpApp, options: HttpServerOptions): Promise<HttpServer> {
  let closing = false;
  const handler = createHttpHandler(app, {
    bodyLimit: options.bodyLimit,
    exposeErrors: options.exposeErrors,
    hideServerErrors: options.hideServerErrors ?? false,
    isClosing: () => closing,
  });
  const limits = options.limits ?? DEFAULT_LIMITS;
  const server = createServer(serverOptions(limits), (req, res) => handler.handle(req, res));
  const unwatch = applyClientLimits(server, limits, app.logger, options.streams);

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port, options.host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  server.on("error", (e) => app.logger.error({ err: e }, "http server error"));
  const { port, address: host } = server.address() as AddressInfo;

  let closed: Promise<void> | undefined;
  const close = (opts?: { timeoutMs?: number }): Promise<void> => {
    closed ??= new Promise<void>((resolve) => {
      // From here every response carries `Connection: close`, so a socket with a request in
      // flight ends after answering it; idle keep-alive sockets are closed right away.
      // No per-request bookkeeping on the hot path: server.close() resolves when the last socket is gone.
      closing = true;
      const deadline =
        opts?.timeoutMs === undefined
          ? undefined
          : setTimeout(() => {
              app.logger.warn(
                "http: shutdown deadline reached; requests still in flight are answered 503 OKE1505, then open connections are closed",
              );
              // A request in flight gets a real answer (its run goes on elsewhere), not a closed
              // socket its client would retry blindly. Those answers are small: written out within
              // a moment unless the client stopped reading, which ANSWER_FLUSH_MS bounds.
              let flushed: NodeJS.Timeout | undefined;
              void Promise.race([
                handler.cutOff(),
                new Promise<void>((r) => {
                  flushed = setTimeout(r, ANSWER_FLUSH_MS);
                  flushed.unref();
                }),
              ]).then(() => {
                clearTimeout(flushed);
                server.closeAllConnections();
              });
            }, opts.timeoutMs);
      deadline?.unref();
      server.close(() => {
        unwatch();
        if (deadline) clearTimeout(deadline);
        // The last answers went out ahead of their completions: close only once those are stored.
        void handler.drain().then(resolve);
      });
      server.closeIdleConnections();
    });
    return closed;
  };

  return { port, host, close, drain: () => handler.drain(), stop: () => handler.stop() };
}
