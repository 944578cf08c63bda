// Slow and numerous clients: slow-loris sockets, header/request timeouts and the connection cap.
import { connect, type Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { DEFAULT_LIMITS, type HttpLimits } from "./client-limits.ts";
import { createFakeApp } from "./fake-app.test-helper.ts";
import { startHttpServer, type HttpServer } from "./server.ts";

// Slow and numerous clients over real sockets: timeouts answer 408 and close, the connection cap holds,
// and the health check answers while hundreds of slow-loris connections hang on.

let server: HttpServer | undefined;
const sockets: Socket[] = [];
afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  await server?.close({ timeoutMs: 1000 });
  server = undefined;
});

const start = async (limits: Partial<HttpLimits> = {}) => {
  server = await startHttpServer(createFakeApp(), {
    port: 0,
    host: "127.0.0.1",
    bodyLimit: 1 << 20,
    exposeErrors: false,
    limits: { ...DEFAULT_LIMITS, ...limits },
  });
  return server.port;
};

/** A raw connection: what it received, and a promise for its close. */
function open(port: number): Promise<{ socket: Socket; received: () => string; closed: Promise<void> }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1");
    sockets.push(socket);
    let text = "";
    socket.setEncoding("utf8");
    socket.on("data", (d: string) => (text += d));
    const closed = new Promise<void>((r) => socket.once("close", () => r()));
    socket.once("error", () => undefined);
    socket.once("connect", () => resolve({ socket, received: () => text, closed }));
    socket.once("error", reject);
  });
}

const bodyOf = (response: string) =>
  JSON.parse(response.slice(response.indexOf("\r\n\r\n") + 4)) as {
    error: { code: string };
  };

describe("slow and numerous clients", () => {
  it("answers /_/health while 300 slow-loris connections hold half-sent headers", async () => {
    const port = await start();
    const loris = await Promise.all(Array.from({ length: 300 }, () => open(port)));
    for (const c of loris) c.socket.write("GET /users/1 HTTP/1.1\r\nhost: x\r\nx-slow: ");
    // One more byte each, as a slow-loris client does to look alive.
    for (const c of loris) c.socket.write("a");
    const health = await fetch(`http://127.0.0.1:${port}/_/health`);
    expect(health.status).toBe(200);
    expect(await health.json()).toEqual({ ok: true, data: { status: "alive" } });
    const route = await fetch(`http://127.0.0.1:${port}/users/7`);
    expect(route.status).toBe(200);
    // None of them got an answer: they are still waiting on their own headers.
    expect(loris.every((c) => c.received() === "")).toBe(true);
  });

  it("answers 408 OKE1408 and closes a connection whose headers do not arrive in time", async () => {
    const port = await start({ headersTimeoutMs: 200, requestTimeoutMs: 1_000 });
    const c = await open(port);
    c.socket.write("GET /users/1 HTTP/1.1\r\nhost: x\r\nx-slow: a");
    await c.closed;
    expect(c.received()).toMatch(/^HTTP\/1\.1 408 /);
    expect(bodyOf(c.received()).error.code).toBe("OKE1408");
  });

  it("answers 408 to a body that does not arrive within the request timeout", async () => {
    const port = await start({ headersTimeoutMs: 200, requestTimeoutMs: 400 });
    const c = await open(port);
    c.socket.write(
      "POST /echo HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{",
    );
    await c.closed;
    expect(c.received()).toMatch(/^HTTP\/1\.1 408 /);
  });

  it("closes an idle keep-alive connection after the keep-alive timeout", async () => {
    const port = await start({ keepAliveTimeoutMs: 100 });
    const c = await open(port);
    c.socket.write("GET /_/health HTTP/1.1\r\nhost: x\r\n\r\n");
    await c.closed;
    expect(c.received()).toMatch(/^HTTP\/1\.1 200 /);
  });

  it("closes connections past maxConnections as they arrive, and serves again once below it", async () => {
    const port = await start({ maxConnections: 3 });
    const held = await Promise.all([open(port), open(port), open(port)]);
    // A full request on each proves the server accepted all three (they then idle in keep-alive).
    await Promise.all(
      held.map(
        (c) =>
          new Promise<void>((resolve) => {
            c.socket.on("data", () => resolve());
            c.socket.write("GET /_/health HTTP/1.1\r\nhost: x\r\n\r\n");
          }),
      ),
    );
    const extra = await open(port);
    extra.socket.write("GET /_/health HTTP/1.1\r\nhost: x\r\n\r\n");
    await extra.closed;
    expect(extra.received()).toBe("");
    for (const c of held) c.socket.destroy();
    await Promise.all(held.map((c) => c.closed));
    // The server counts a connection gone when it sees the close; poll until it answers again.
    for (;;) {
      const again = await fetch(`http://127.0.0.1:${port}/_/health`).catch(() => undefined);
      if (again?.status === 200) break;
      await new Promise((r) => setImmediate(r));
    }
  });

  it("answers oversized headers with 431 OKE1431 and a malformed request with 400", async () => {
    const port = await start();
    const big = await open(port);
    big.socket.write(`GET /_/health HTTP/1.1\r\nhost: x\r\nx-big: ${"a".repeat(20_000)}\r\n\r\n`);
    await big.closed;
    expect(big.received()).toMatch(/^HTTP\/1\.1 431 /);
    expect(bodyOf(big.received()).error.code).toBe("OKE1431");
    const bad = await open(port);
    bad.socket.write("NOT HTTP AT ALL\r\n\r\n");
    await bad.closed;
    expect(bad.received()).toMatch(/^HTTP\/1\.1 400 /);
    expect(bodyOf(bad.received()).error.code).toBe("OKE1400");
  });
});
