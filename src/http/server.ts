/** startHttpServer: node:http around the handler, with timeouts and a graceful close. */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { applyClientLimits, DEFAULT_LIMITS, serverOptions, type HttpLimits } from "./client-limits.ts";
import { createHttpHandler, type HttpApp } from "./handler.ts";
import type { StreamCount } from "./sse.ts";

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
   * keep-alive sockets. After `timeoutMs` (default: no deadline) the remaining
   * connections are cut. Resolves once the keyed answers sent are stored too.
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
              app.logger.warn("http: shutdown deadline reached, closing open connections");
              server.closeAllConnections();
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
