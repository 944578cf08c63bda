// The Console's sign-in with the keyboard only, in headless Chromium: the token field has the focus at load, after a refused token and after signing out.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Browser, Page } from "playwright-core";
import { launchChromium } from "../support/chromium.ts";
import { LONG } from "../support/console-browser.ts";
import { createApp } from "../../src/app/app.ts";
import type { App } from "../../src/app/types.ts";
import { createMemoryStore } from "../../src/store/memory/memory-store.ts";

const TOKEN = "browser-keyboard-token-0123456789";

describe("signing in with the keyboard only", () => {
  let app: App;
  let url: string;
  let browser: Browser;
  let page: Page;
  // A string: the project compiles without the DOM lib.
  const focused = () =>
    page.evaluate<string>("document.activeElement?.id || document.activeElement?.tagName || ''");

  beforeAll(async () => {
    app = createApp({
      modules: [],
      env: "test",
      store: createMemoryStore(),
      config: { console: { port: 0, tokens: { alice: TOKEN } } },
    });
    url = (await app.start({ port: 0, host: "127.0.0.1" })).console!.url;
    browser = await launchChromium();
    page = await browser.newPage({ viewport: { width: 1200, height: 800 } });
  });
  afterAll(async () => {
    await browser?.close();
    await app?.stop({ timeoutMs: 2_000 });
  });

  it("puts the focus in the token field at load, after a refused token, and after signing out", async () => {
    await page.goto(url + "/");
    await page.getByLabel("Operator token").waitFor(LONG);
    await expect.poll(focused, LONG).toBe("token");
    // Typed where the focus is: no click, no Tab.
    await page.keyboard.type("wrong-token-xxxxxxxxxx");
    await page.keyboard.press("Enter");
    await page.getByRole("alert").waitFor(LONG);
    await expect.poll(focused, LONG).toBe("token");
    await page.keyboard.type(TOKEN);
    await page.keyboard.press("Enter");
    await page.getByRole("heading", { name: "Overview" }).waitFor(LONG);
    await page.getByRole("button", { name: "Sign out" }).focus();
    await page.keyboard.press("Enter");
    await page.getByRole("heading", { name: "Sign in" }).waitFor(LONG);
    await expect.poll(focused, LONG).toBe("token");
  });
});
