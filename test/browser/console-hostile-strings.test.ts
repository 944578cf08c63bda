// Hostile strings on the Console page in headless Chromium: markup in every name, message and payload stays text; bidi controls and invisible characters are shown, not obeyed; long names open; the focus ring is visible on the light page.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { consoleApi, LONG, openConsolePage, type ConsolePage } from "../support/console-browser.ts";
import { createApp } from "../../src/app/app.ts";
import type { App } from "../../src/app/types.ts";
import { flow, on, signal } from "../../src/index.ts";
import { createMemoryStore } from "../../src/store/memory/memory-store.ts";

const TOKEN = "browser-hostile-token-0123456789";
/** Markup that runs if any of it is parsed as HTML, and a right-to-left override that reverses what follows it. */
const EVIL = (where: string) =>
  `<img src=x onerror="window.__pwned='${where}'"></script><script>window.__pwned='${where}'</script>javascript:alert(1) \u202Egnp.exe\u200B`;

const evil = signal.once<{ p: string }>(`orders.${EVIL("signal")}`, { retries: 0 });
const evilWorker = on(
  evil,
  flow(`orders.fulfil.${EVIL("flow")}`, {
    do: () => {
      throw new Error(EVIL("error"));
    },
  }),
);
// Over 100 characters: a path parameter the router refused by default (a broadcast's copies queue,
// `~broadcast:<signal>:<flow>`, gets there with two names of 45 characters).
const LONG_NAME =
  "billing.invoices.monthly-statement.generated.for-enterprise-customers.with-consolidated-ledger.international-shipping";
const longSignal = signal.once<{ n: number }>(LONG_NAME, { retries: 0 });
const longWorker = on(
  longSignal,
  flow("shipping.notify", {
    do: () => {
      throw new Error("carrier down");
    },
  }),
);
const failing = flow("evil.durable", {
  durable: true,
  do: async (_: { p: string }, fx) => {
    await fx.step(EVIL("step"), () => {
      throw new Error(EVIL("run"));
    });
  },
});

/** WCAG's relative luminance of an `rgb(r, g, b)` / `rgba(…)` color. */
function luminance(css: string): number {
  const [r, g, b] = css
    .match(/[\d.]+/g)!
    .slice(0, 3)
    .map((x) => {
      const c = Number(x) / 255;
      return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
    }) as [number, number, number];
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
}
const contrast = (a: string, b: string): number => {
  const [hi, lo] = [luminance(a), luminance(b)].sort((x, y) => y - x) as [number, number];
  return (hi + 0.05) / (lo + 0.05);
};

describe("hostile strings on the Console page", () => {
  let app: App;
  let url: string;
  let cp: ConsolePage;
  let deadId: string;
  let runId: string;

  beforeAll(async () => {
    app = createApp({
      modules: [{ evilWorker, longWorker, failing }],
      env: "test",
      store: createMemoryStore(),
      config: { console: { port: 0, tokens: { alice: TOKEN } } },
    });
    url = (await app.start({ port: 0, host: "127.0.0.1" })).console!.url;
    await app.emit(evil, { p: EVIL("payload") }, { key: EVIL("key") });
    await app.emit(longSignal, { n: 1 });
    await app.invoke(failing, { p: EVIL("input") }).catch(() => undefined);
    await app.idle();
    const api = consoleApi(url, TOKEN);
    const overview = await api.get<{
      recentFailures: { deadLetters: Array<{ id: string; signal: string }> };
    }>("/api/overview");
    deadId = overview.recentFailures.deadLetters.find((d) => d.signal === evil.name)!.id;
    runId = (await api.get<{ items: Array<{ id: string }> }>("/api/runs?flow=evil.durable")).items[0]!.id;
    cp = await openConsolePage(url, TOKEN);
  });
  afterAll(async () => {
    await cp?.close();
    await app?.stop({ timeoutMs: 2_000 });
  });

  it("renders markup in names, keys, errors, payloads and step names as text, in every view", async () => {
    const views: Array<[string, string | RegExp]> = [
      ["#/", "Overview"],
      [`#/signal/${encodeURIComponent(evil.name)}?status=dead`, /^Signal orders\./],
      [`#/message/${deadId}`, `Message ${deadId}`],
      [`#/run/${runId}`, `Run ${runId}`],
      ["#/runs", "Runs"],
      ["#/audit", "Audit log"],
    ];
    for (const [hash, heading] of views) {
      await cp.open(hash, heading);
      expect(await cp.page.locator("main img, main script").count(), hash).toBe(0);
      expect(await cp.page.evaluate("window.__pwned"), hash).toBeUndefined();
    }
    // The dead letter's view shows the handler's error message and the payload as written.
    await cp.open(`#/message/${deadId}`, `Message ${deadId}`);
    await expect
      .poll(() => cp.page.locator("main").textContent(), LONG)
      .toContain(`<img src=x onerror="window.__pwned='error'">`);
    expect(await cp.page.locator("main").textContent()).toContain(`window.__pwned='payload'`);
    expect(cp.pageErrors).toEqual([]);
    expect(cp.cspViolations).toEqual([]);
  });

  it("shows bidi controls and zero-width characters by code point, never obeying them, in views and confirmations", async () => {
    await cp.open(`#/message/${deadId}`, `Message ${deadId}`);
    const text = (await cp.page.locator("main").textContent())!;
    // An override in the signal's name would run the line after it backwards ("daed sutats").
    expect(text).not.toMatch(/[\u202a-\u202e\u2066-\u2069\u200b]/);
    expect(text).toContain("javascript:alert(1) ⟨U+202E⟩gnp.exe⟨U+200B⟩");
    cp.answer = false;
    await cp.page.getByRole("button", { name: "Replay this message" }).click();
    await expect.poll(() => cp.dialogs.length, LONG).toBeGreaterThan(0);
    expect(cp.dialogs.at(-1)).toBe(`Replay message ${deadId}?`);
    await cp.open(`#/signal/${encodeURIComponent(evil.name)}?status=dead`, /^Signal orders\./);
    await cp.page.getByRole("button", { name: "Replay all", exact: true }).click();
    await expect.poll(() => cp.dialogs.at(-1), LONG).toMatch(/^Replay all 1 dead letter\(s\) of orders\./);
    expect(cp.dialogs.at(-1)).toContain("⟨U+202E⟩gnp.exe⟨U+200B⟩?");
    expect(cp.dialogs.at(-1)).not.toMatch(/[\u202e\u200b]/);
    cp.answer = true;
  });

  it("opens a signal whose name is over 100 characters, with its dead letters", async () => {
    await cp.open(`#/signal/${encodeURIComponent(LONG_NAME)}?status=dead`, `Signal ${LONG_NAME}`);
    await expect.poll(() => cp.page.locator("#signal-counts").textContent(), LONG).toContain("dead 1");
    await cp.page.locator("main tbody input[type=checkbox]").first().waitFor(LONG);
    expect(cp.pageErrors).toEqual([]);
  });

  it("draws the keyboard focus ring at 3:1 or more against the page", async () => {
    await cp.open("#/", "Overview");
    const link = cp.page.getByRole("link", { name: "the whole audit log" });
    await link.waitFor(LONG);
    await link.focus();
    // Keyboard focus, so :focus-visible applies as it does for a Tab.
    await cp.page.keyboard.press("Shift+Tab");
    await cp.page.keyboard.press("Tab");
    expect(await cp.page.evaluate<string>("document.activeElement.getAttribute('aria-label')")).toBe(
      "the whole audit log",
    );
    // The focused element's outline and the first opaque background behind it (a string: the
    // project compiles without the DOM lib).
    const { ring, background } = await cp.page.evaluate<{ ring: string; background: string }>(`(() => {
      const el = document.activeElement;
      const clear = (c) => /rgba\\(0, 0, 0, 0\\)|transparent/.test(c);
      let bg = "rgba(0, 0, 0, 0)";
      for (let n = el; n && clear(bg); n = n.parentElement) bg = getComputedStyle(n).backgroundColor;
      if (clear(bg)) bg = getComputedStyle(document.documentElement).backgroundColor;
      return { ring: getComputedStyle(el).outlineColor, background: bg };
    })()`);
    expect(contrast(ring, background)).toBeGreaterThanOrEqual(3);
  });
});
