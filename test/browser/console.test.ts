// The Console in headless Chromium: sign-in refusal, a dead letter replayed, a sleeping run woken, a trace chain followed.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Browser, Page } from "playwright-core";
import { launchChromium } from "../support/chromium.ts";
import { createApp } from "../../src/app/app.ts";
import type { App } from "../../src/app/types.ts";
import { flow, on, signal } from "../../src/index.ts";
import { createMemoryStore } from "../../src/store/memory/memory-store.ts";

const TOKEN = "browser-test-token-0123456789";
const SHOTS = process.env.OKE_CONSOLE_SCREENSHOTS; // a directory: write docs/img screenshots there

let broken = true;
const orders = signal.once<{ id: number }>("orders.created", { retries: 1 });
const worker = on(
  orders,
  flow("orders.fulfil", {
    do: ({ id }: { id: number }) => {
      if (broken && id === 7)
        throw Object.assign(new Error("warehouse API timed out"), { code: "E_TIMEOUT" });
    },
  }),
);
const receipt = flow("trial.receipt", {
  durable: true,
  do: async (_: { user: string }, fx) => fx.step("render", () => "ok"),
});
const trial = flow("trial.start", {
  durable: true,
  do: async ({ user }: { user: string }, fx) => {
    await fx.step("create-account", () => ({ user }));
    await fx.call(receipt, { user });
    await fx.clock.sleep("trial-expiry", "7d");
    return "expired";
  },
});

// Broadcast copies must show under their signal on the overview, never as signals of their own.
const placed = signal.broadcast<{ id: number }>("orders.placed");
const charge = on(placed, flow("orders.charge", { do: () => undefined }));

describe("the Console in headless Chromium", () => {
  let app: App;
  let url: string;
  let browser: Browser;
  let page: Page;

  beforeAll(async () => {
    app = createApp({
      modules: [{ worker, trial, receipt, placed, charge }],
      env: "test",
      store: createMemoryStore(),
      config: { console: { port: 0, tokens: { alice: TOKEN } } },
    });
    const started = await app.start({ port: 0, host: "127.0.0.1" });
    url = started.console!.url;
    for (let id = 1; id <= 8; id++) await app.emit(orders, { id });
    await app.invoke(trial, { user: "ada" });
    await app.emit(placed, { id: 1 });
    await app.idle();
    browser = await launchChromium();
    page = await browser.newPage({ viewport: { width: 1200, height: 800 } });
    page.on("dialog", (d) => void d.accept());
  });
  afterAll(async () => {
    await browser?.close();
    await app?.stop({ timeoutMs: 2_000 });
  });

  const shot = async (name: string) => {
    if (SHOTS) await page.screenshot({ path: `${SHOTS}/${name}.png`, fullPage: true });
  };

  it("refuses without the token, then signs in", async () => {
    const res = await page.request.get(`${url}/api/signals`);
    expect(res.status()).toBe(401);
    await page.goto(url + "/");
    await page.getByLabel("Operator token").fill("wrong-token-xxxxxxxxxx");
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("alert").waitFor({ timeout: 8_000 });
    expect(await page.getByRole("alert").textContent()).toContain("OKE1602");
    await page.getByLabel("Operator token").fill(TOKEN);
    await page.keyboard.press("Enter");
    await page.getByRole("heading", { name: "Overview" }).waitFor({ timeout: 8_000 });
    const copies = page.getByRole("row", { name: /copies for orders\.charge/ });
    await copies.waitFor();
    expect((await copies.textContent())!.replace(/\s+/g, " ")).toMatch(
      /copies for orders\.charge\s*copies\s*0\s*0\s*0\s*1/,
    );
    expect(await page.getByText("~broadcast").count()).toBe(0);
    await shot("console-overview");
  });

  it("finds a dead letter and its failure history, replays it and sees it delivered", async () => {
    await page.getByRole("link", { name: "signal orders.created" }).click();
    await page.getByRole("heading", { name: "Signal orders.created" }).waitFor();
    const msgLink = page.getByRole("link", { name: /^message / }).first();
    await msgLink.click();
    await page.getByRole("heading", { name: "Failure history" }).waitFor();
    expect(await page.locator("table").first().textContent()).toContain("warehouse API timed out");
    expect(await page.locator("#message-status").textContent()).toBe("dead");
    await shot("console-dead-letter");
    broken = false;
    await page.getByRole("button", { name: "Replay this message" }).click();
    await page.locator("#message-status", { hasText: "delivered" }).waitFor({ timeout: 15_000 });
    await page.getByRole("link", { name: "Audit log" }).click();
    await page.getByRole("cell", { name: "alice" }).first().waitFor();
  });

  it("finds a sleeping run by its label, wakes it early and sees it completed; follows the trace chain to its child", async () => {
    await page.goto(`${url}/#/runs`);
    await page.getByLabel("Sleep label").fill("trial-expiry");
    await page.getByLabel("Sleep label").press("Enter");
    await page.getByRole("cell", { name: "trial-expiry" }).waitFor();
    await page.getByRole("link", { name: /^run / }).first().click();
    await page.getByRole("heading", { name: "Timeline" }).waitFor();
    await shot("console-run");
    const child = page.getByRole("link", { name: /^run / }).filter({ hasNotText: "" }).last();
    await page.getByRole("button", { name: "Wake now" }).focus();
    await page.keyboard.press("Enter");
    await page.locator("#run-status", { hasText: "completed" }).waitFor({ timeout: 15_000 });
    await child.click();
    await page.getByText("Parent:").waitFor();
    expect(await page.locator("main h1").textContent()).toMatch(/^Run /);
    expect(await page.locator("main").textContent()).toContain("trial.receipt");
    await page.getByRole("link", { name: "Instances" }).click();
    await page.getByText("(this one)").waitFor();
    await shot("console-instances");
  });
});
