// An EventSource in headless Chromium on a live route: history, new entries, resume after a server restart.
import { fileURLToPath } from "node:url";
import pg from "pg";
import type { Browser } from "playwright-core";
import { launchChromium } from "../support/chromium.ts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPostgresStore } from "../../src/store/postgres/postgres-store.ts";
import { TEST_DATABASE_URL } from "../conformance/drivers.ts";
import { Child } from "../process/spawn.ts";
import { freePort } from "../support/free-port.ts";

// A real browser's EventSource on a live route, across a server restart.

const CHILD = fileURLToPath(new URL("../process/fanout-child.ts", import.meta.url));
const schema = `oke_browser_${process.pid}`;
const admin = new pg.Pool({ connectionString: TEST_DATABASE_URL, max: 2 });
const children: Child[] = [];
let browser: Browser | undefined;

const spawnChild = (port: number): Child => {
  const c = new Child({ DATABASE_URL: TEST_DATABASE_URL, OKE_SCHEMA: schema, OKE_PORT: String(port) }, CHILD);
  children.push(c);
  return c;
};
const ready = (c: Child) => c.waitFor((e) => e.event === "ready", "ready");

const post = async (port: number, state: string): Promise<void> => {
  const r = await fetch(`http://127.0.0.1:${port}/orders/o9/status`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ state }),
  });
  expect(r.status).toBe(204);
};

beforeAll(async () => {
  await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  const store = createPostgresStore({ connectionString: TEST_DATABASE_URL, schema });
  await store.open();
  await store.close();
  // The child records broadcast runs here; this test only uses its live routes.
  await admin.query(
    `CREATE TABLE "${schema}".fanout_runs (id bigserial PRIMARY KEY, flow text NOT NULL, event text NOT NULL, pid int NOT NULL)`,
  );
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
  for (const c of children) if (c.proc.exitCode === null) await c.kill();
  await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await admin.end();
});

describe("EventSource in headless Chromium", () => {
  it("gets history then new entries, survives a server restart and resumes with Last-Event-ID: no gap, no duplicate", async () => {
    const port = await freePort();
    const other = await freePort();
    let a = spawnChild(port);
    const b = spawnChild(other);
    await Promise.all([ready(a), ready(b)]);
    await post(port, "placed");
    await post(port, "paid");

    const page = await browser!.newPage();
    // Same origin as the stream: no CORS in the way.
    await page.goto(`http://127.0.0.1:${port}/_/health`);
    // Page scripts as text: this project's TypeScript has no DOM library.
    await page.evaluate(`
      window.got = [];
      window.errors = 0;
      const es = new EventSource("/orders/o9/status");
      es.onmessage = (e) => window.got.push({ id: e.lastEventId, data: e.data });
      es.onerror = () => window.errors++;
    `);
    const got = () => page.evaluate<Array<{ id: string; data: string }>>("window.got");
    const waitGot = (n: number) =>
      page.waitForFunction(`window.got.length >= ${n}`, undefined, { timeout: 20_000 });

    await waitGot(2); // history
    await post(port, "packed");
    await waitGot(3); // live

    // Restart the server the browser is connected to; meanwhile another instance takes an emit.
    a.proc.kill("SIGTERM");
    await a.exited;
    await post(other, "shipped");
    a = spawnChild(port);
    await ready(a);
    await waitGot(4); // reconnected with Last-Event-ID: gets what it missed
    await post(port, "delivered");
    await waitGot(5);

    const events = await got();
    expect(events.map((e) => (JSON.parse(e.data) as { state: string }).state)).toEqual([
      "placed",
      "paid",
      "packed",
      "shipped",
      "delivered",
    ]);
    const ids = events.map((e) => Number(e.id));
    expect(new Set(ids).size).toBe(5);
    expect([...ids].sort((x, y) => x - y)).toEqual(ids);
    // The stream did drop at the restart (so the resume above was a reconnect, not luck).
    expect(await page.evaluate("window.errors")).toBeGreaterThan(0);
    await page.close();
    // Three instance starts (tsx) and a browser reconnect: more than the default 30 s on a loaded machine.
  }, 90_000);
});
