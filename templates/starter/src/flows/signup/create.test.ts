import { expect, test } from "vitest";
import { createTestApp } from "okengine/testing";

const post = (body: unknown) => ({
  method: "POST",
  headers: { "content-type": "application/json" },
  body: JSON.stringify(body),
});

test("GET /hello answers", async () => {
  const app = await createTestApp({ project: "." });
  const res = await app.request("/hello");
  expect(await res.json()).toEqual({ ok: true, data: { message: "Hello from okengine" } });
  await app.stop();
});

test("a signup queues the welcome mail, and the worker sends it", async () => {
  const app = await createTestApp({ project: "." });
  const res = await app.request("/signup", post({ email: "ada@example.com" }));
  expect(res.status).toBe(200);
  await app.idle(); // every queue drained
  expect(app.sent).toEqual([
    expect.objectContaining({ channel: "email", payload: { to: "ada@example.com", subject: "Welcome!" } }),
  ]);
  await app.stop();
});

test("a bad address is refused with 422", async () => {
  const app = await createTestApp({ project: "." });
  expect((await app.request("/signup", post({ email: "nope" }))).status).toBe(422);
  await app.stop();
});
