import { expect, test } from "vitest";
import { createTestApp } from "okengine/testing";

test("the reminder goes out three days after the trial starts (time travel, no real waiting)", async () => {
  const app = await createTestApp({ project: ".", start: Date.UTC(2026, 0, 1) });
  const res = await app.request("/trials/start", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ email: "ada@example.com" }),
  });
  expect(res.status).toBe(204); // parked on the 3-day sleep

  app.time.advance("2d");
  await app.idle();
  expect(app.sent).toEqual([]);

  app.time.advance("1d");
  await app.idle();
  expect(app.sent).toEqual([
    expect.objectContaining({
      channel: "email",
      payload: { to: "ada@example.com", subject: "Your trial ends today" },
    }),
  ]);
  await app.stop();
});
