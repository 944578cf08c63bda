// Request input limits over HTTP: invalid UTF-8 (400), NUL, lone surrogates and depth (422), in-process and on a socket.
import { request as httpRequest } from "node:http";
import { afterEach, describe, expect, it } from "vitest";
import { createFakeApp } from "./fake-app.test-helper.ts";
import { createHttpHandler } from "./handler.ts";
import { startHttpServer, type HttpServer } from "./server.ts";

// Bodies the store could not hold, and bytes that are not text, are refused before the flow runs.

const setup = () => {
  const app = createFakeApp();
  const handler = createHttpHandler(app, { bodyLimit: 1 << 20, exposeErrors: false });
  const call = (path: string, init?: RequestInit) => handler.fetch(new Request(`http://test${path}`, init));
  return { app, call };
};
const codeOf = async (res: Response): Promise<string> =>
  ((await res.json()) as { error: { code: string } }).error.code;
const json = { "content-type": "application/json" };

let server: HttpServer | undefined;
afterEach(async () => {
  await server?.close({ timeoutMs: 1000 });
  server = undefined;
});

describe("request bodies the store cannot hold", () => {
  it("answers 400 OKE1440 for invalid UTF-8 instead of replacing the bytes", async () => {
    const { app, call } = setup();
    // {"name":"\xff"} — 0xff never appears in UTF-8.
    const bytes = Buffer.concat([Buffer.from('{"name":"'), Buffer.from([0xff]), Buffer.from('"}')]);
    const res = await call("/echo", { method: "POST", headers: json, body: bytes });
    expect(res.status).toBe(400);
    expect(await codeOf(res)).toBe("OKE1440");
    // An overlong encoding of "/" and a truncated sequence are refused too.
    for (const bad of [
      [0xc0, 0xaf],
      [0xe2, 0x82],
    ]) {
      const body = Buffer.concat([Buffer.from('{"name":"'), Buffer.from(bad), Buffer.from('"}')]);
      expect((await call("/echo", { method: "POST", headers: json, body })).status).toBe(400);
    }
    expect(app.calls).toHaveLength(0);
    // Real multi-byte text is fine.
    const ok = await call("/echo", { method: "POST", headers: json, body: Buffer.from('{"name":"é😀"}') });
    expect(await ok.json()).toEqual({ ok: true, data: { hello: "é😀" } });
  });

  it("answers 422 for NUL, lone surrogates and depth, in the body, path and query", async () => {
    const { app, call } = setup();
    const post = (body: string) => call("/echo", { method: "POST", headers: json, body });
    expect(await codeOf(await post('{"name":"a\\u0000"}'))).toBe("OKE1255");
    expect(await codeOf(await post('{"na\\u0000me":"a"}'))).toBe("OKE1255");
    expect(await codeOf(await post('{"name":"\\udc00"}'))).toBe("OKE1256");
    expect(await codeOf(await post("[".repeat(10_000) + "]".repeat(10_000)))).toBe("OKE1252");
    expect(await codeOf(await call("/users/a%00b"))).toBe("OKE1255");
    expect(await codeOf(await call("/users/1?q=%00"))).toBe("OKE1255");
    const res = await post('{"name":"a\\u0000"}');
    expect(res.status).toBe(422);
    expect(((await res.json()) as { error: { message: string } }).error.message).toBe(
      "request body: string at $.name contains a NUL character (\\u0000)",
    );
    expect(app.calls).toHaveLength(0);
  });

  it("gives the same answers on a real socket", async () => {
    const app = createFakeApp();
    server = await startHttpServer(app, {
      port: 0,
      host: "127.0.0.1",
      bodyLimit: 1 << 20,
      exposeErrors: false,
    });
    const send = (body: Buffer): Promise<{ status: number; body: string }> =>
      new Promise((resolve, reject) => {
        const req = httpRequest(
          { host: "127.0.0.1", port: server!.port, method: "POST", path: "/echo", headers: json },
          (res) => {
            let text = "";
            res.setEncoding("utf8");
            res.on("data", (c: string) => (text += c));
            res.on("end", () => resolve({ status: res.statusCode!, body: text }));
          },
        );
        req.on("error", reject);
        req.end(body);
      });
    const bad = await send(Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xfe, 0x22, 0x7d]));
    expect(bad.status).toBe(400);
    expect(JSON.parse(bad.body).error.code).toBe("OKE1440");
    const nul = await send(Buffer.from('{"name":"\\u0000"}'));
    expect(nul.status).toBe(422);
    expect(JSON.parse(nul.body).error.code).toBe("OKE1255");
    expect(app.calls).toHaveLength(0);
  });
});
