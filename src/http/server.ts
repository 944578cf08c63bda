import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { createHttpHandler, type HttpApp } from "./handler.ts";

export interface HttpServerOptions {
  port: number;
  host?: string;
  bodyLimit: number;
  exposeErrors: boolean;
}

export interface HttpServer {
  /** The bound port (useful with `port: 0`). */
  port: number;
  /**
   * Stops accepting, lets in-flight requests finish, then closes the idle
   * keep-alive sockets. After `timeoutMs` (default: no deadline) the remaining
   * connections are cut.
   */
  close(options?: { timeoutMs?: number }): Promise<void>;
}

// Longer than the usual load-balancer idle timeout (60 s), so the balancer, not
// us, closes idle keep-alive connections and never reuses one we just closed.
const KEEP_ALIVE_MS = 72_000;

export async function startHttpServer(app: HttpApp, options: HttpServerOptions): Promise<HttpServer> {
  const handler = createHttpHandler(app, { bodyLimit: options.bodyLimit, exposeErrors: options.exposeErrors });
  const inFlight = new Set<ServerResponse>();
  let closing = false;

  const server = createServer({ keepAliveTimeout: KEEP_ALIVE_MS }, (req, res) => {
    inFlight.add(res);
    res.once("close", () => {
      inFlight.delete(res);
      // The socket this response used is idle now; during shutdown, close it.
      if (closing) setImmediate(() => server.closeIdleConnections());
    });
    if (closing) res.setHeader("connection", "close");
    handler.handle(req, res);
  });

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port, options.host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  server.on("error", (e) => app.logger.error({ err: e }, "http server error"));
  const port = (server.address() as AddressInfo).port;

  let closed: Promise<void> | undefined;
  const close = (opts?: { timeoutMs?: number }): Promise<void> => {
    closed ??= new Promise<void>((resolve) => {
      closing = true;
      // Responses not yet started tell their client this connection ends with them.
      for (const res of inFlight) if (!res.headersSent) res.setHeader("connection", "close");
      const deadline =
        opts?.timeoutMs === undefined
          ? undefined
          : setTimeout(() => {
              app.logger.warn({ inFlight: inFlight.size }, "http: shutdown deadline reached, closing open connections");
              server.closeAllConnections();
            }, opts.timeoutMs);
      deadline?.unref();
      server.close(() => {
        if (deadline) clearTimeout(deadline);
        resolve();
      });
      server.closeIdleConnections();
    });
    return closed;
  };

  return { port, close };
}
