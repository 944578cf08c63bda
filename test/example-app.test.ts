// The example shop app (examples/shop) end to end, in-process on the memory driver.
/// <reference types="vite/client" />
import { describe, expect, it } from "vitest";
import { createTestApp, type TestApp } from "../src/testing.ts";
import config from "../examples/shop/oke.config.ts";
import { orderStatus } from "../examples/shop/src/signals/orders.ts";

// The example's files with their project paths, as `oke` would load them. (vitest resolves
// `@/` and `okengine` through the aliases in vitest.config.ts.)
const files = import.meta.glob<Record<string, unknown>>(
  "../examples/shop/src/{signals,channels,flows}/**/*.ts",
  { eager: true },
);
const modules = Object.entries(files).map(([file, exports]) => ({
  path: file.replace("../examples/shop/", ""),
  exports,
}));
const shop = (start?: number): Promise<TestApp> =>
  createTestApp({ modules, config, ...(start === undefined ? {} : { start }) });

const post = (body: unknown) => ({
  method: "POST",
  headers: { "content-type": "application/json" },
  body: JSON.stringify(body),
});

describe("the example app (examples/shop)", () => {
  it("serves the routes its file tree declares", async () => {
    const app = await shop();
    expect(app.manifest.routes).toEqual(
      [
        { method: "POST", path: "/ops/send-email", flow: "ops.sendEmail" },
        { method: "GET", path: "/ops/email-dlq", flow: "ops.list" },
        { method: "POST", path: "/orders", flow: "orders.create" },
        { method: "GET", path: "/orders/:id/status", flow: "orders.status" },
        { method: "POST", path: "/trials/start", flow: "trials.start" },
      ].sort((a, b) => a.path.localeCompare(b.path)),
    );
    await app.stop();
  });

  it("an order's status feed tells placed, charged, shipped in order", async () => {
    const app = await shop();
    const res = await app.request("/orders", post({ userId: "u1", amount: 12 }));
    const { data } = (await res.json()) as { data: { orderId: string } };
    await app.idle();
    const states: string[] = [];
    const stop = app.live(orderStatus, { key: data.orderId }, (e) => void states.push(e.payload.state));
    const end = Date.now() + 10_000;
    while (states.length < 3 && Date.now() < end) await new Promise((r) => setImmediate(r));
    stop();
    expect(states).toEqual(["placed", "charged", "shipped"]);
    await app.stop();
  });

  it("a mail to a bouncing address retries twice, then lands in the dead-letter list", async () => {
    const app = await shop();
    expect((await app.request("/ops/send-email", post({ to: "x@bounce.test", body: "hi" }))).status).toBe(
      204,
    );
    await app.idle();
    const { data } = (await (await app.request("/ops/email-dlq")).json()) as {
      data: Array<{ attempts: number; status: string }>;
    };
    expect(data).toHaveLength(1);
    expect(data[0]).toMatchObject({ attempts: 3, status: "dead" });
    await app.stop();
  });

  it("an order is fulfilled by a durable consumer that emits the confirmation mail", async () => {
    const app = await shop();
    const res = await app.request("/orders", post({ userId: "u1", amount: 12 }));
    const { data } = (await res.json()) as { data: { orderId: string } };
    await app.idle();
    expect(app.sent.map((m) => m.payload)).toEqual([
      { to: "warehouse@example.com", body: `ship ${data.orderId}` },
      { to: "u1@example.com", body: `Order ${data.orderId} charged (ch_${data.orderId})` },
    ]);
    await app.stop();
  });

  it("a trial parks for three days (204), then the reminder goes out once", async () => {
    const app = await shop(Date.UTC(2026, 0, 1));
    const res = await app.request("/trials/start", post({ email: "ada@example.com" }));
    expect(res.status).toBe(204);
    app.time.advance("3d");
    await app.idle();
    const [run] = await app.operator.runs({ status: "completed" });
    expect(run?.flow).toBe("trials.start");
    expect(app.sent).toEqual([
      {
        channel: "email.raw",
        payload: { to: "ada@example.com", body: "Your trial ends today." },
        at: Date.UTC(2026, 0, 4),
      },
    ]);
    await app.stop();
  });

  it("the morning dead-letter report fires at 07:00 Paris time, once per day", async () => {
    const app = await shop(Date.UTC(2026, 5, 1, 4, 0));
    expect(await app.operator.schedules.get("ops.dlqReport")).toMatchObject({
      cron: "0 7 * * *",
      timezone: "Europe/Paris",
      nextFireAt: Date.UTC(2026, 5, 1, 5, 0),
    });
    app.time.advance("1h");
    await app.idle();
    app.time.advance("1h");
    await app.idle();
    expect(await app.operator.schedules.get("ops.dlqReport")).toMatchObject({
      lastScheduledAt: Date.UTC(2026, 5, 1, 5, 0),
      nextFireAt: Date.UTC(2026, 5, 2, 5, 0),
      missedRuns: 0,
      lastError: null,
    });
    await app.stop();
  });
});
