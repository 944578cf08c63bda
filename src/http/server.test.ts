// The node:http server on a real port: keep-alive, 413s, disconnecting clients, graceful close.
import { request as httpRequest, Agent } from "node:http";
import { connect } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { createFakeApp } from "./fake-app.test-helper.ts";
import { startHttpServer, type HttpServer } from "./server.ts";

let server: HttpServer | undefined;
afterEach(async () => {
  await server?.close({ timeoutMs: 1000 });
  server = undefined;
});

/** A raw node:http request, so the test controls headers the fetch API would set itself. */
function raw(
  port: number,
  opts: {
    method: string;
    path: string;
    headers?: Record<string, string | number>;
    body?: string;
    agent?: Agent;
  },
): Promise<{ status: number; headers: Record<string, unknown>; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: "127.0.0.1",
        port,
        method: opts.method,
        path: opts.path,
        headers: opts.headers,
        agent: opts.agent,
      },
      (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => (body += c));
        res.on("end", () => resolve({ status: res.statusCode!, headers: res.headers, body }));
      },
    );
    req.on("error", reject);
    req.end(opts.body);
  });
}

describe("startHttpServer (real port)", () => {
  it("serves the envelope over a keep-alive connection", async () => {
    const app = createFakeApp();
    server = await startHttpServer(app, { port: 0, host: "127.0.0.1", bodyLimit: 1024, exposeErrors: false });
    expect(server.port).toBeGreaterThan(0);
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const sockets = new Set<unknown>();
    agent.on("free", (s) => sockets.add(s));
    const a = await raw(server.port, {
      method: "POST",
      path: "/echo",
      headers: { "content-type": "application/json" },
      body: '{"name":"ada"}',
      agent,
    });
    const b = await raw(server.port, { method: "GET", path: "/users/9?x=1", agent });
    expect(a).toMatchObject({ status: 200, body: '{"ok":true,"data":{"hello":"ada"}}' });
    expect(JSON.parse(b.body)).toEqual({ ok: true, data: { id: "9", query: { x: "1" } } });
    expect(sockets.size).toBe(1);
    const health = await fetch(`http://127.0.0.1:${server.port}/_/health`);
    expect(await health.json()).toEqual({ ok: true, data: { status: "alive" } });
    agent.destroy();
  });

  it("answers 413 from Content-Length alone, and closes the connection", async () => {
    const app = createFakeApp();
    server = await startHttpServer(app, { port: 0, host: "127.0.0.1", bodyLimit: 100, exposeErrors: false });
    const res = await raw(server.port, {
      method: "POST",
      path: "/echo",
      headers: { "content-type": "application/json", "content-length": 200 },
      body: JSON.stringify({ name: "x".repeat(185) }),
    });
    expect(res.status).toBe(413);
    expect(res.headers.connection).toBe("close");
    expect(JSON.parse(res.body).error.code).toBe("OKE1413");
    expect(app.calls).toHaveLength(0);
  });

  it("answers 413 for a chunked body past the limit", async () => {
    const app = createFakeApp();
    server = await startHttpServer(app, { port: 0, host: "127.0.0.1", bodyLimit: 100, exposeErrors: false });
    const res = await raw(server.port, {
      method: "POST",
      path: "/echo",
      headers: { "content-type": "application/json", "transfer-encoding": "chunked" },
      body: JSON.stringify({ name: "x".repeat(300) }),
    });
    expect(res.status).toBe(413);
    expect(app.calls).toHaveLength(0);
  });

  it("survives a client that disconnects in the middle of its body", async () => {
    const app = createFakeApp();
    server = await startHttpServer(app, { port: 0, host: "127.0.0.1", bodyLimit: 1000, exposeErrors: false });
    const socket = connect(server.port, "127.0.0.1");
    // "Expect: 100-continue": the interim 100 proves the server is reading this request's body.
    socket.write(
      "POST /echo HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\nexpect: 100-continue\r\n\r\n",
    );
    await new Promise<void>((resolve) =>
      socket.on("data", (d: Buffer) => {
        if (d.toString().startsWith("HTTP/1.1 100")) resolve();
      }),
    );
    socket.write('{"name":');
    socket.destroy();
    const logged = await app.waitForLog((l) => l.msg.startsWith("http request body interrupted"));
    expect(logged.level).toBe(20);
    expect(app.calls).toHaveLength(0);
    // Still serving.
    expect((await fetch(`http://127.0.0.1:${server.port}/_/health`)).status).toBe(200);
  });

  it("close() waits for in-flight requests, then resolves", async () => {
    const app = createFakeApp();
    const s = await startHttpServer(app, { port: 0, host: "127.0.0.1", bodyLimit: 100, exposeErrors: false });
    const agent = new Agent({ keepAlive: true });
    const pending = raw(s.port, { method: "GET", path: "/slow", agent });
    await app.slowStarted;
    let closed = false;
    const closing = s.close().then(() => (closed = true));
    // New connections are refused once close() started.
    await expect(fetch(`http://127.0.0.1:${s.port}/_/health`)).rejects.toThrow();
    expect(closed).toBe(false);
    app.releaseSlow();
    const res = await pending;
    expect(res.status).toBe(200);
    expect(res.headers.connection).toBe("close");
    await closing;
    expect(closed).toBe(true);
    agent.destroy();
  });

  it("a request still in flight at the close deadline is answered 503 OKE1505 with Retry-After before its socket closes", async () => {
    const fake = createFakeApp();
    // The slow route's flow is durable here: the answer says its run goes on elsewhere.
    const app = {
      ...fake,
      manifest: { routes: fake.manifest.routes, flows: [{ name: "slow", durable: true }] },
    };
    const s = await startHttpServer(app, { port: 0, host: "127.0.0.1", bodyLimit: 100, exposeErrors: false });
    const pending = raw(s.port, { method: "GET", path: "/slow" });
    await fake.slowStarted;
    // The flow never answers before the deadline (it is released only after the close).
    await s.close({ timeoutMs: 20 });
    const res = await pending;
    expect(res.status).toBe(503);
    expect(res.headers["retry-after"]).toBe("2");
    expect(res.headers.connection).toBe("close");
    const body = JSON.parse(res.body) as {
      ok: boolean;
      error: { code: string; message: string; fix: string };
    };
    expect(body.ok).toBe(false);
    expect(body.error.code).toBe("OKE1505");
    expect(body.error.message).toContain("another instance continues it");
    expect(body.error.fix).toContain("Idempotency-Key");
    const logged = await fake.waitForLog((l) => l.code === "OKE1505");
    expect(logged).toMatchObject({ level: 40, status: 503, flow: "slow" });
    // The flow's late answer changes nothing (no second write on the answered socket).
    fake.releaseSlow();
    // The flow's answer settles in microtasks: all of them have run before the next macrotask.
    await new Promise((r) => setImmediate(r));
    expect(fake.logs.filter((l) => l.msg.startsWith("http: failed to answer"))).toEqual([]);
  });
});
