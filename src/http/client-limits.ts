// How long and how many: the timeouts and the connection cap that bound slow or numerous clients, and the answers to requests Node refuses before routing.
import type { Server } from "node:http";
import type { Socket } from "node:net";
import type { Logger } from "../log/logger.ts";
import type { StreamCount } from "./sse.ts";

export interface HttpLimits {
  /** Request headers must arrive within this many ms of the connection or the previous request. */
  headersTimeoutMs: number;
  /** The whole request (headers and body) must arrive within this many ms. */
  requestTimeoutMs: number;
  /** Idle keep-alive connections close after this many ms. */
  keepAliveTimeoutMs: number;
  /**
   * Open connections at most, not counting those that hold an SSE stream
   * (they count against `live.maxConnections`); more are closed as they arrive.
   */
  maxConnections: number;
}

// Longer than the usual load-balancer idle timeout (60 s), so the balancer, not
// us, closes idle keep-alive connections and never reuses one we just closed.
export const DEFAULT_LIMITS: HttpLimits = Object.freeze({
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  keepAliveTimeoutMs: 72_000,
  maxConnections: 1_000,
});

/** Node server options for these limits (createServer's first argument). */
export function serverOptions(limits: HttpLimits): {
  keepAliveTimeout: number;
  headersTimeout: number;
  requestTimeout: number;
  connectionsCheckingInterval: number;
} {
  return {
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    // Node refuses a headers timeout above the request timeout.
    headersTimeout: Math.min(limits.headersTimeoutMs, limits.requestTimeoutMs),
    requestTimeout: limits.requestTimeoutMs,
    // Node checks both timeouts on this tick (default 30 s: a 10 s header limit held sockets ~40 s).
    connectionsCheckingInterval: Math.max(50, Math.min(1_000, Math.floor(limits.headersTimeoutMs / 4))),
  };
}

// Node's own answers carry no body; these are the envelope, like every other okengine answer.
const raw = (status: number, reason: string, code: string, message: string): string => {
  const body = JSON.stringify({ ok: false, error: { code, message } });
  return (
    `HTTP/1.1 ${status} ${reason}\r\nconnection: close\r\ncontent-type: application/json; charset=utf-8\r\n` +
    `content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
  );
};
const TIMEOUT = raw(408, "Request Timeout", "OKE1408", "The request did not arrive in time.");
const HEADERS_TOO_LARGE = raw(
  431,
  "Request Header Fields Too Large",
  "OKE1431",
  "Request headers are too large.",
);
const MALFORMED = raw(400, "Bad Request", "OKE1400", "Malformed HTTP request.");

/**
 * Applies the connection cap and answers what Node's parser refuses (a
 * malformed request, headers over 16 KiB, a request past a timeout) with an
 * envelope body, then closes the connection.
 *
 * Sockets holding an SSE stream (`streams`) are left out of the cap: Node's
 * `server.maxConnections` counts every socket, so it is kept at the HTTP cap
 * plus the streams open now. 10 000 open streams then never lock ordinary
 * requests out, and a stream that ends gives its socket back to the HTTP
 * count (it may stay as an idle keep-alive connection). Returns the unwatch.
 */
export function applyClientLimits(
  server: Server,
  limits: HttpLimits,
  logger: Logger,
  streams?: StreamCount,
): () => void {
  const cap = (open: number): void => {
    server.maxConnections = limits.maxConnections + open;
  };
  cap(streams?.size ?? 0);
  const unwatch = streams?.watch(cap) ?? (() => undefined);
  let lastDropWarning = -Infinity;
  server.on("drop", () => {
    // One line per 10 s at most: a flood must not also flood the log (monotonic: a host clock step
    // back must not mute it).
    const now = performance.now();
    if (now - lastDropWarning < 10_000) return;
    lastDropWarning = now;
    logger.warn(
      { maxConnections: limits.maxConnections, liveStreams: streams?.size ?? 0 },
      "http: connection limit reached, closing new connections",
    );
  });
  server.on("clientError", (err: Error & { code?: string }, socket: Socket) => {
    if (err.code === "ECONNRESET" || !socket.writable) {
      socket.destroy();
      return;
    }
    const answer =
      err.code === "ERR_HTTP_REQUEST_TIMEOUT"
        ? TIMEOUT
        : err.code === "HPE_HEADER_OVERFLOW"
          ? HEADERS_TOO_LARGE
          : MALFORMED;
    socket.end(answer);
  });
  return unwatch;
}
