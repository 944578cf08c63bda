// Path parameters, body and query merged into a flow input; contradictions are 422 naming the field.
import { afterEach, describe, expect, it } from "vitest";
import type { App } from "../app/types.ts";
import { createApp, flow, http, on } from "../index.ts";

// Path parameters win over body and query fields; a disagreement is a 422 naming the field.

let app: App | undefined;
afterEach(async () => {
  await app?.stop();
  app = undefined;
});

const seen: unknown[] = [];
const make = (): App => {
  seen.length = 0;
  const echo = (input: unknown) => {
    seen.push(input);
    return { input };
  };
  app = createApp({
    env: "test",
    modules: [
      {
        exports: {
          put: on(http.put("/users/:id"), flow("users.put", { do: echo })),
          get: on(http.get("/users/:id"), flow("users.get", { do: echo })),
          items: on(http.post("/items"), flow("items.add", { do: echo })),
        },
      },
    ],
  });
  return app;
};
const JSON_TYPE = { "content-type": "application/json" };
const send = (a: App, method: string, path: string, body?: unknown) =>
  a.request(path, {
    method,
    ...(body === undefined ? {} : { body: JSON.stringify(body), headers: JSON_TYPE }),
  });
const errorOf = async (res: Response) =>
  ((await res.json()) as { error: { code: string; message: string; details?: unknown } }).error;

describe("path parameters, body and query", () => {
  it("refuses a body field that contradicts the path parameter (422 OKE1424 naming it); the flow never runs", async () => {
    const a = make();
    const res = await send(a, "PUT", "/users/42", { id: "999", name: "x" });
    expect(res.status).toBe(422);
    const error = await errorOf(res);
    expect(error.code).toBe("OKE1424");
    expect(error.message).toBe('Field "id" is given by the path ("42") and by the body ("999").');
    expect(error.details).toEqual([{ path: "id", message: "path and body disagree" }]);
    expect(seen).toEqual([]);
  });

  it("accepts the same value in both places; the flow sees the path's", async () => {
    const a = make();
    expect(await (await send(a, "PUT", "/users/42", { id: "42", name: "x" })).json()).toEqual({
      ok: true,
      data: { input: { id: "42", name: "x" } },
    });
    // A number the client sent for the id is the same field.
    expect(await (await send(a, "PUT", "/users/42", { id: 42 })).json()).toEqual({
      ok: true,
      data: { input: { id: "42" } },
    });
  });

  it("refuses a query field that contradicts the path, and a body field that contradicts the query", async () => {
    const a = make();
    const q = await send(a, "GET", "/users/42?id=7");
    expect(q.status).toBe(422);
    expect((await errorOf(q)).message).toBe(
      'Field "id" is given by the path ("42") and by the query string ("7").',
    );
    const bq = await send(a, "POST", "/items?tag=a", { tag: "b" });
    expect((await errorOf(bq)).message).toBe(
      'Field "tag" is given by the query string ("a") and by the body ("b").',
    );
    // Agreement is fine, and the fields merge.
    expect(await (await send(a, "POST", "/items?tag=a&n=1", { tag: "a", qty: 2 })).json()).toEqual({
      ok: true,
      data: { input: { tag: "a", n: "1", qty: 2 } },
    });
    expect(seen).toHaveLength(1);
  });

  it("refuses a non-object body when the URL carries fields (OKE1425), takes it as is otherwise", async () => {
    const a = make();
    const res = await send(a, "PUT", "/users/42", [1, 2]);
    expect(res.status).toBe(422);
    expect((await errorOf(res)).code).toBe("OKE1425");
    expect(await (await send(a, "POST", "/items", [1, 2])).json()).toEqual({
      ok: true,
      data: { input: [1, 2] },
    });
  });

  it("treats a __proto__ field as data, never as the input's prototype", async () => {
    const a = make();
    await a.request("/users/42", {
      method: "PUT",
      headers: JSON_TYPE,
      body: '{"__proto__":{"admin":true},"name":"x"}',
    });
    const input = seen[0] as Record<string, unknown>;
    expect(Object.getPrototypeOf(input)).toBe(Object.prototype);
    expect((input as { admin?: unknown }).admin).toBeUndefined();
    expect(input.id).toBe("42");
  });

  it("a path parameter of any length the request line allows reaches the flow (not a 404 past 100 characters)", async () => {
    const a = make();
    const long = "t".repeat(4_000);
    const res = await send(a, "GET", `/users/${long}`);
    expect(res.status).toBe(200);
    expect(seen).toEqual([{ id: long }]);
  });

  it("gives the same answer on a real socket", async () => {
    const a = make();
    const { port } = await a.start({ port: 0, host: "127.0.0.1" });
    const res = await fetch(`http://127.0.0.1:${port}/users/42`, {
      method: "PUT",
      headers: { "content-type": "application/json" },
      body: '{"id":"999"}',
    });
    expect(res.status).toBe(422);
    expect((await errorOf(res)).code).toBe("OKE1424");
    expect(seen).toEqual([]);
  });
});
