// The Console page in headless Chromium for the browser tests: a signed-in page that records page errors, CSP violations and the dialogs (confirm, prompt) it answered.
import type { Browser, Page } from "playwright-core";
import { expect } from "vitest";
import { launchChromium } from "./chromium.ts";

/** Conditions, never sleeps: every wait ends as soon as what it waits for is on screen. */
export const LONG = { timeout: 15_000 };

// Browser globals in the init script, typed just enough: the project compiles without the DOM lib.
declare const document: {
  addEventListener(
    type: "securitypolicyviolation",
    listener: (e: { violatedDirective: string; sourceFile: string; lineNumber: number }) => void,
  ): void;
};
declare const window: { __cspViolation(text: string): void };

export interface ConsolePage {
  browser: Browser;
  page: Page;
  /** Uncaught errors of the page's script. */
  pageErrors: string[];
  /** Content-Security-Policy violations the page reported. */
  cspViolations: string[];
  /** The text of every confirm() the page asked, in order. */
  dialogs: string[];
  /** What the next confirm() gets: true accepts it, false cancels. */
  answer: boolean;
  /** What the next prompt() gets: the text typed, or null to cancel it. */
  typed: string | null;
  /** Goes to `#/…` and waits for that address's view (not the previous one) and its heading. */
  open(hash: string, heading: string | RegExp): Promise<void>;
  /** Closes the browser. */
  close(): Promise<void>;
}

/**
 * Launches Chromium (the flags of support/chromium.ts), opens the Console at `url` and signs in with
 * `token`, waiting for the overview. A 1200 × 800 viewport unless told otherwise.
 */
export async function openConsolePage(
  url: string,
  token: string,
  options: { viewport?: { width: number; height: number } } = {},
): Promise<ConsolePage> {
  const browser = await launchChromium();
  const context = await browser.newContext({ viewport: options.viewport ?? { width: 1200, height: 800 } });
  const opened: ConsolePage = {
    browser,
    page: undefined as unknown as Page,
    pageErrors: [],
    cspViolations: [],
    dialogs: [],
    answer: true,
    typed: null,
    async open(hash, heading) {
      await opened.page.goto(`${url}/${hash}`);
      await opened.page.locator("main h1", { hasText: heading }).waitFor(LONG);
      // The view of this address, not the previous one with the same heading (a signal's other tab).
      await opened.page.locator(`main > [data-key="view ${hash}"]`).waitFor(LONG);
    },
    close: () => browser.close(),
  };
  await context.exposeBinding("__cspViolation", (_source, text: string) => {
    opened.cspViolations.push(text);
  });
  await context.addInitScript(() => {
    document.addEventListener("securitypolicyviolation", (e) => {
      window.__cspViolation(`${e.violatedDirective} ${e.sourceFile}:${e.lineNumber}`);
    });
  });
  const page = await context.newPage();
  opened.page = page;
  page.on("console", (m) => {
    if (/Content Security Policy/i.test(m.text())) opened.cspViolations.push(m.text());
  });
  page.on("pageerror", (e) => opened.pageErrors.push(e.message));
  page.on("dialog", (d) => {
    opened.dialogs.push(d.message());
    if (d.type() === "prompt") void (opened.typed === null ? d.dismiss() : d.accept(opened.typed));
    else void (opened.answer ? d.accept() : d.dismiss());
  });
  await page.goto(url + "/");
  await page.getByLabel("Operator token").fill(token);
  await page.keyboard.press("Enter");
  await page.getByRole("heading", { name: "Overview" }).waitFor(LONG);
  return opened;
}

/** The Console's JSON API with a bearer token, as the tests call it beside the page. */
export function consoleApi(url: string, token: string) {
  const headers = {
    authorization: `Bearer ${token}`,
    "content-type": "application/json",
    "x-oke-console": "1",
  };
  return {
    /** GET, expecting 200. */
    async get<T>(path: string): Promise<T> {
      const res = await fetch(url + path, { headers });
      expect(res.status).toBe(200);
      return (await res.json()) as T;
    },
    /** POST with a JSON body (an operator action), whatever it answers. */
    post: (path: string, body: unknown): Promise<Response> =>
      fetch(url + path, { method: "POST", headers, body: JSON.stringify(body) }),
  };
}
