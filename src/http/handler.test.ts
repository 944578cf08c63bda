// The HTTP handler through fetch: routing, bodies, errors, readiness.
import { describe, expect, it } from "vitest";
import { createHttpHandler } from "./handler.ts";
import { createFakeApp } from "./fake-app.test-helper.ts";
import { toRequest } from "./in-process.ts";

const setup = (options: { bodyLimit?: number; exposeErrors?: boolean } = {}) => {
  const app = createFakeApp();
  const handler = createHttpHandler(app, {
    bodyLimit: options.bodyLimit ?? 1024,
    exposeErrors: options.exposeErrors ?? false,
  });
  const call = (path: string, init?: RequestInit) => handler.fetch(new Request(`http://test${path}`, init));
  return { app, handler, call };
};

const json = { "content-type": "application/json" };

interface Envelope {
  ok: boolean;
  reason?: string;
  data?: unknown;
  error: { code: string; message: string; fix?: string; details?: { message?: string; stack?: string } };
}
const read = async (res: Response): Promise<Envelope> => (await res.json()) as Envelope;

describe("http envelope: success", () => {
  it("answers 200 {ok,data} and hands params, query, body and headers to the app", async () => {
    const { app, call } = setup();
    const res = await call("/users/a%20b?tag=x&tag=y&q=hello%20world&empty=", {
      headers: { "x-trace": "t1" },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("application/json; charset=utf-8");
    expect(await read(res)).toEqual({
      ok: true,
      data: { id: "a b", query: { tag: ["x", "y"], q: "hello world", empty: "" } },
    });
    const req = app.calls[0]!.request;
    expect(app.calls[0]!.route.flow).toBe("users.get");
    expect({ ...req.params }).toEqual({ id: "a b" });
    expect(req.body).toBeUndefined();
    expect(req.headers["x-trace"]).toBe("t1");
  });

  it("parses a JSON body for POST/PUT/PATCH", async () => {
    const { app, call } = setup();
    const res = await call("/echo", { method: "POST", headers: json, body: '{"name":"ada"}' });
    expect(res.status).toBe(200);
    expect(await read(res)).toEqual({ ok: true, data: { hello: "ada" } });
    expect(app.calls[0]!.request.body).toEqual({ name: "ada" });
    const put = await call("/users/7", {
      method: "PUT",
      headers: { "content-type": "application/merge-patch+json" },
      body: "[1,2]",
    });
    expect(await read(put)).toEqual({ ok: true, data: { id: "7", body: [1, 2] } });
  });

  it("passes an empty body as undefined", async () => {
    const { app, call } = setup();
    const res = await call("/users/1", { method: "PUT", headers: json, body: "" });
    expect(res.status).toBe(200);
    expect(app.calls[0]!.request.body).toBeUndefined();
  });

  it("serialises null as data: null, not 204", async () => {
    const { call } = setup();
    const res = await call("/null");
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('{"ok":true,"data":null}');
  });

  it("answers 204 with no body for undefined and for a parked durable flow", async () => {
    const { call } = setup();
    for (const res of [
      await call("/nothing"),
      await call("/park", { method: "POST", headers: json, body: "{}" }),
    ]) {
      expect(res.status).toBe(204);
      expect(await res.text()).toBe("");
      expect(res.headers.get("content-type")).toBeNull();
    }
  });
});

describe("http envelope: errors", () => {
  it("422 lists the input issues the app reports", async () => {
    const { call } = setup();
    const res = await call("/echo", { method: "POST", headers: json, body: '{"name":42}' });
    expect(res.status).toBe(422);
    expect(await read(res)).toEqual({
      ok: false,
      error: {
        code: "OKE1422",
        message: 'Invalid input for flow "echo"',
        details: [{ path: "name", message: "Expected string" }],
      },
    });
  });

  it("400 OKE1400 on malformed JSON, without calling the flow", async () => {
    const { app, call } = setup();
    const res = await call("/echo", { method: "POST", headers: json, body: '{"name":' });
    expect(res.status).toBe(400);
    const body = await read(res);
    expect(body.ok).toBe(false);
    expect(body.error.code).toBe("OKE1400");
    expect(body.error.message).toMatch(/^Malformed JSON body/);
    expect(app.calls).toHaveLength(0);
  });

  it("413 OKE1413 when Content-Length is over the limit", async () => {
    const { app, call } = setup({ bodyLimit: 16 });
    const res = await call("/echo", {
      method: "POST",
      headers: json,
      body: JSON.stringify({ name: "x".repeat(64) }),
    });
    expect(res.status).toBe(413);
    expect((await read(res)).error.code).toBe("OKE1413");
    expect(app.calls).toHaveLength(0);
  });

  it("413 on a streamed body stops reading once past the limit", async () => {
    const { app, handler } = setup({ bodyLimit: 1000 });
    let pulled = 0;
    const endless = new ReadableStream<Uint8Array>({
      pull(controller) {
        pulled++;
        controller.enqueue(new TextEncoder().encode(" ".repeat(100)));
      },
    });
    const req = new Request("http://test/echo", {
      method: "POST",
      headers: json,
      body: endless,
      duplex: "half",
    });
    const res = await handler.fetch(req);
    expect(res.status).toBe(413);
    expect(pulled).toBeLessThan(20);
    expect(app.calls).toHaveLength(0);
  });

  it("400 when the body stream breaks before it ends, without calling the flow", async () => {
    const { app, handler } = setup();
    const broken = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(new TextEncoder().encode('{"name":'));
        controller.error(new Error("socket hang up"));
      },
    });
    const res = await handler.fetch(
      new Request("http://test/echo", { method: "POST", headers: json, body: broken, duplex: "half" }),
    );
    expect(res.status).toBe(400);
    expect((await read(res)).error.code).toBe("OKE1400");
    expect(app.calls).toHaveLength(0);
  });

  it("accepts a body of exactly bodyLimit bytes", async () => {
    const { call } = setup({ bodyLimit: 14 });
    const res = await call("/echo", { method: "POST", headers: json, body: '{"name":"abc"}' });
    expect(res.status).toBe(200);
  });

  it("415 OKE1415 for a non-JSON content-type with a body", async () => {
    const { app, call } = setup();
    const res = await call("/echo", {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: "name=ada",
    });
    expect(res.status).toBe(415);
    expect((await read(res)).error.code).toBe("OKE1415");
    expect(app.calls).toHaveLength(0);
  });

  it("404 OKE1404 for an unknown route", async () => {
    const { call } = setup();
    const res = await call("/nope");
    expect(res.status).toBe(404);
    expect((await read(res)).error).toMatchObject({ code: "OKE1404", message: "No route for GET /nope." });
  });

  it("405 OKE1405 with Allow for a known path and another method", async () => {
    const { call } = setup();
    const res = await call("/users/1", { method: "DELETE" });
    expect(res.status).toBe(405);
    expect(res.headers.get("allow")).toBe("GET, PUT");
    expect((await read(res)).error.code).toBe("OKE1405");
  });

  it("keeps an OkeError's status, code, message and fix", async () => {
    const { call } = setup();
    const res = await call("/conflict");
    expect(res.status).toBe(409);
    expect(await read(res)).toEqual({
      ok: false,
      error: { code: "OKE2409", message: "Order already paid", fix: "Refresh the order." },
    });
  });

  it("500 OKE1500 'Internal error' hides the message and stack outside dev", async () => {
    const { call } = setup();
    const res = await call("/boom");
    expect(res.status).toBe(500);
    const text = await res.text();
    expect(JSON.parse(text)).toEqual({ ok: false, error: { code: "OKE1500", message: "Internal error" } });
    expect(text).not.toContain("hunter2");
    expect(text).not.toContain("handler");
  });

  it("500 includes message and stack in details when exposeErrors (dev)", async () => {
    const { call } = setup({ exposeErrors: true });
    const body = await read(await call("/boom"));
    expect(body.error.code).toBe("OKE1500");
    expect(body.error.details?.message).toBe("secret: password=hunter2");
    expect(body.error.details?.stack).toContain("fake-app");
  });

  it("500 when the result cannot be serialised", async () => {
    const { call } = setup();
    const res = await call("/bigint");
    expect(res.status).toBe(500);
    expect((await read(res)).error.code).toBe("OKE1500");
  });

  it("logs failed requests: 4xx at info, 5xx at error with the cause", async () => {
    const { app, call } = setup();
    await call("/nope");
    await call("/boom");
    expect(app.logs.find((l) => l.status === 404)?.level).toBe(30);
    const e = app.logs.find((l) => l.status === 500)!;
    expect(e.level).toBe(50);
    expect(e.code).toBe("OKE1500");
    // The route's flow is named (a 404 reached none).
    expect(e.flow).toBe("boom");
    expect(app.logs.find((l) => l.status === 404)?.flow).toBeUndefined();
    expect(e.err?.message).toBe("secret: password=hunter2");
    expect(app.logs.some((l) => l.status === 200)).toBe(false);
  });
});

describe("health and readiness", () => {
  it("GET /_/health is alive and takes precedence over a user route", async () => {
    const { app, call } = setup();
    app.ready = { ready: false, reason: "orphan_scan" };
    const res = await call("/_/health");
    expect(res.status).toBe(200);
    expect(await read(res)).toEqual({ ok: true, data: { status: "alive" } });
    expect(app.calls).toHaveLength(0);
  });

  it("GET /_/ready follows app.readiness()", async () => {
    const { app, call } = setup();
    app.ready = { ready: false, reason: "orphan_scan" };
    const res = await call("/_/ready");
    expect(res.status).toBe(503);
    const body = await read(res);
    expect(body).toEqual({
      ok: false,
      reason: "orphan_scan",
      error: { code: "OKE1503", message: "not ready", reason: "orphan_scan" },
    });
    app.ready = { ready: true };
    const ok = await call("/_/ready");
    expect(ok.status).toBe(200);
    expect(await read(ok)).toEqual({ ok: true, data: { status: "ready" } });
  });

  it("405 for other methods on the system paths", async () => {
    const { call } = setup();
    const res = await call("/_/ready", { method: "POST" });
    expect(res.status).toBe(405);
    expect(res.headers.get("allow")).toBe("GET");
  });
});

describe("toRequest (app.request helper)", () => {
  it("adds an origin; a JSON body says so, as from a real client", async () => {
    const { handler } = setup();
    const res = await handler.fetch(
      toRequest("/echo", {
        method: "POST",
        body: '{"name":"bo"}',
        headers: { "content-type": "application/json" },
      }),
    );
    expect(await read(res)).toEqual({ ok: true, data: { hello: "bo" } });
  });

  it("sends a string body without a content type as fetch does (text/plain): 415, as over HTTP", async () => {
    const { handler } = setup();
    const res = await handler.fetch(toRequest("/echo", { method: "POST", body: '{"name":"bo"}' }));
    expect(res.status).toBe(415);
  });

  it("keeps an explicit content-type", async () => {
    const { handler } = setup();
    const res = await handler.fetch(
      toRequest("/echo", { method: "POST", body: "x", headers: { "content-type": "text/plain" } }),
    );
    expect(res.status).toBe(415);
  });
});

describe("the shutdown deadline (cutOff)", () => {
  it("answers a request still in flight 503 OKE1505 with Retry-After; the flow's late answer is dropped; one answered before is untouched", async () => {
    const { app, handler, call } = setup();
    const answered = await call("/users/1");
    expect(answered.status).toBe(200);
    const pending = call("/slow");
    await app.slowStarted;
    await handler.cutOff();
    const res = await pending;
    expect(res.status).toBe(503);
    expect(res.headers.get("retry-after")).toBe("2");
    const body = await read(res);
    expect(body.error.code).toBe("OKE1505");
    // A plain flow (the fake app declares no durable one): it may have done part of its work.
    expect(body.error.message).toContain("before the request's flow answered");
    expect(body.error.fix).toBe(
      "Retry if the flow is safe to run twice; an Idempotency-Key makes a retry safe.",
    );
    expect(app.logs.find((l) => l.code === "OKE1505")).toMatchObject({ level: 40, flow: "slow" });
    app.releaseSlow();
    // Nothing else is in flight: a second cutOff answers nothing and logs nothing more.
    await handler.cutOff();
    expect(app.logs.filter((l) => l.code === "OKE1505")).toHaveLength(1);
  });
});
