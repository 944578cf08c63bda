// A request without a body to a route whose `in` refuses undefined: 422 OKE1422 saying the body is missing, issues kept.
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import type { App } from "../index.ts";
import { createApp, flow, http, on } from "../index.ts";

interface Envelope {
  ok: boolean;
  data?: unknown;
  error?: { code: string; message: string; fix?: string; details?: Array<{ path: string; message: string }> };
}
const read = async (res: Response): Promise<Envelope> => (await res.json()) as Envelope;

const signupIn = z.object({ email: z.string() });
const signup = flow("signup", { in: signupIn, do: ({ email }) => ({ email }) });

const modules = [
  {
    exports: {
      signup: on(http.post("/signup"), signup),
      rename: on(
        http.put("/users/:id"),
        flow("users.rename", {
          in: z.object({ id: z.string(), name: z.string() }),
          do: (input) => input,
        }),
      ),
      search: on(
        http.get("/search"),
        flow("search", { in: z.object({ q: z.string() }), do: (input) => input }),
      ),
      // No `in` of its own: the 422 comes from the flow it calls, not from the request.
      relay: on(
        http.post("/relay"),
        flow("relay", { do: (input: unknown, fx) => fx.call(signup, input as { email: string }) }),
      ),
    },
  },
];

const NO_BODY =
  "The request has no body; this route (POST /signup) expects a JSON body (content-type: application/json).";

let app: App | undefined;
afterEach(async () => {
  await app?.stop();
  app = undefined;
});

describe("a request without a body", () => {
  it("answers 422 OKE1422 naming the missing body, with the validator's issues in details (app.request)", async () => {
    app = createApp({ env: "test", modules });
    await app.boot();
    const expected = {
      ok: false,
      error: {
        code: "OKE1422",
        message: NO_BODY,
        fix: 'Send the input as a JSON body with "content-type: application/json"; details lists what the schema asks for.',
        details: [expect.objectContaining({ message: "Invalid input: expected object, received undefined" })],
      },
    };

    const none = await app.request("/signup", { method: "POST" });
    expect(none.status).toBe(422);
    expect(await read(none)).toEqual(expected);

    // An empty JSON body is no body either.
    const empty = await app.request("/signup", {
      method: "POST",
      headers: { "content-type": "application/json", "content-length": "0" },
      body: "",
    });
    expect(empty.status).toBe(422);
    expect(await read(empty)).toEqual(expected);
  });

  it("leaves every other 422 as the validator wrote it", async () => {
    app = createApp({ env: "test", modules });
    await app.boot();

    const wrong = await read(
      await app.request("/signup", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: "{}",
      }),
    );
    expect(wrong.error?.code).toBe("OKE1422");
    expect(wrong.error?.message).toMatch(/^Flow "signup": input does not match its schema: /);
    expect(wrong.error?.message).not.toContain("no body");

    // The path gives the flow an input: the validator names the missing field itself.
    const put = await read(await app.request("/users/42", { method: "PUT" }));
    expect(put.error?.code).toBe("OKE1422");
    expect(put.error?.message).toMatch(/^Flow "users.rename": .*name/);

    // A GET's body is never read: nothing to say about one.
    const get = await read(await app.request("/search"));
    expect(get.error?.code).toBe("OKE1422");
    expect(get.error?.message).toMatch(/^Flow "search": input does not match its schema: /);

    // The route's flow took `undefined`; the flow it called refused it. That is not the client's body.
    const relay = await app.request("/relay", { method: "POST" });
    expect(relay.status).toBe(422);
    expect((await read(relay)).error?.message).toMatch(/^Flow "signup": input does not match its schema: /);
  });

  it("says the same over a real socket (content-length: 0)", async () => {
    app = createApp({ env: "test", modules });
    const { port } = await app.start({ port: 0, host: "127.0.0.1" });
    const res = await fetch(`http://127.0.0.1:${port}/signup`, { method: "POST" });
    expect(res.status).toBe(422);
    const body = await read(res);
    expect(body.error?.code).toBe("OKE1422");
    expect(body.error?.message).toBe(NO_BODY);
    expect(body.error?.details).toEqual([
      expect.objectContaining({ message: "Invalid input: expected object, received undefined" }),
    ]);
  });
});
