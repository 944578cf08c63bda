// The Console page in headless Chromium: a broadcast subscriber that always fails shows as failed (its copies linked and browsable), a live signal's page says it has a tape, and the Schedules view marks a stranded clock and shows no zone for an interval.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Page } from "playwright-core";
import { LONG, openConsolePage, type ConsolePage } from "../support/console-browser.ts";
import { until } from "../conformance/app-fixture.ts";
import { createApp } from "../../src/app/app.ts";
import type { App } from "../../src/app/types.ts";
import { clock, flow, on, signal } from "../../src/index.ts";
import { broadcastQueue } from "../../src/signal/broadcast-runtime.ts";
import { createMemoryStore } from "../../src/store/memory/memory-store.ts";
import type { Store } from "../../src/store/types.ts";

const TOKEN = "browser-broadcast-token-0123456789";

const news = signal.broadcast<{ n: number }>("news.posted");
const newsRead = on(news, flow("news.read", { do: () => undefined }));
const newsBreak = on(
  news,
  flow("news.break", {
    do: ({ n }: { n: number }) => {
      throw new Error(`news ${n} broke`);
    },
  }),
);
const ticker = signal.live<{ n: number }>("ticker.moved");
// A cron in Paris that an operator turns into an interval: the zone stays stored, and means nothing.
const paris = on(
  clock("reports.paris", { cron: "0 3 * * *", timezone: "Europe/Paris", overridable: true }),
  flow("reports.paris", { do: () => undefined }),
);
// Declared only by the legacy app: once it stops, its next slot (within a second) passes unfired.
const legacyTick = on(clock("legacy.tick", { every: "1s" }), flow("legacy.tick", { do: () => undefined }));

describe("broadcast failures, live signals and stranded schedules on the Console page", () => {
  let store: Store;
  let app: App;
  let url: string;
  let cp: ConsolePage;
  let page: Page;
  const breaks = broadcastQueue("news.posted", "news.break");

  beforeAll(async () => {
    store = createMemoryStore();
    const legacy = createApp({ modules: [{ legacyTick }], env: "test", store });
    await legacy.start({ port: 0, host: "127.0.0.1" });
    app = createApp({
      modules: [{ newsRead, newsBreak, ticker, paris }],
      env: "test",
      store,
      config: { console: { port: 0, tokens: { alice: TOKEN } } },
    });
    url = (await app.start({ port: 0, host: "127.0.0.1" })).console!.url;
    await legacy.stop({ timeoutMs: 2_000 });
    for (let n = 1; n <= 40; n++) await app.emit(news, { n });
    await app.idle();
    await app.operator.schedules.edit("reports.paris", { every: "30s" });
    cp = await openConsolePage(url, TOKEN);
    page = cp.page;
  });
  afterAll(async () => {
    await cp?.close();
    await app?.stop({ timeoutMs: 2_000 });
    await store?.close();
  });

  it("the overview says how many copies failed, lists them as recent failures, and links each flow's copies", async () => {
    const row = page.locator('main tr[data-key="copies news.posted news.break"]');
    await row.locator(".copies-failed").waitFor(LONG);
    expect(await row.locator(".copies-failed").textContent()).toBe("40 failed");
    expect(
      await page.locator('main tr[data-key="copies news.posted news.read"] .copies-failed').count(),
    ).toBe(0);
    const failures = page.locator('main tr[data-key^="copy "]');
    expect(await failures.count()).toBe(10);
    expect(await failures.first().textContent()).toMatch(
      /broadcast copy .+\/news\.break of news\.posted for news\.break.*news \d+ broke$/,
    );
    const copiesLink = row.getByRole("link", { name: "copies for news.break of news.posted" });
    expect(await copiesLink.getAttribute("href")).toBe(`#/signal/${encodeURIComponent(breaks)}`);
    await copiesLink.click();
    await page.getByRole("heading", { name: "Copies of news.posted for news.break" }).waitFor(LONG);
    expect(await page.locator("#signal-counts").textContent()).toContain("delivered 40 · 40 failed");
    // Delivered copies first, each with its failure; nothing to replay or discard on copies.
    await page
      .locator("main tbody tr td.bad", { hasText: /^news \d+ broke$/ })
      .first()
      .waitFor(LONG);
    expect(await page.locator("main tbody tr").count()).toBe(40);
    expect(await page.getByRole("button", { name: /Replay|Discard/ }).count()).toBe(0);
    expect(cp.pageErrors).toEqual([]);
  });

  it("a live signal's page says it keeps a tape, not a queue; a broadcast's lists its copies", async () => {
    await cp.open(`#/signal/${encodeURIComponent("ticker.moved")}`, "Signal ticker.moved");
    expect(await page.locator("#no-queue").textContent()).toMatch(
      /^ticker\.moved is a live signal: it keeps a tape of entries, not a queue of messages/,
    );
    expect(await page.locator("main").textContent()).not.toContain("OKE1605");
    await cp.open(`#/signal/${encodeURIComponent("news.posted")}`, "Signal news.posted");
    expect(await page.locator("#no-queue").textContent()).toMatch(/^news\.posted is a broadcast signal/);
    expect(
      await page.getByRole("link", { name: "copies for news.break of news.posted" }).getAttribute("href"),
    ).toBe(`#/signal/${encodeURIComponent(breaks)}`);
    expect(await page.locator('main tr[data-key="copies news.posted news.break"]').textContent()).toContain(
      "40 failed",
    );
    expect(cp.pageErrors).toEqual([]);
  });

  it("the Schedules view marks a clock no live instance declares as stranded, and shows no zone for an interval", async () => {
    await until(
      async () =>
        (
          (await (
            await fetch(`${url}/api/schedules`, { headers: { authorization: `Bearer ${TOKEN}` } })
          ).json()) as { schedules: Array<{ name: string; stranded: boolean }> }
        ).schedules.some((s) => s.name === "legacy.tick" && s.stranded),
      "legacy.tick stranded",
    );
    await cp.open("#/schedules", "Schedules");
    const state = page.locator('main tr[data-key="schedule legacy.tick"] td.state');
    expect(await state.textContent()).toMatch(
      /^strandedno live instance declares it: nothing fires it\. Deploy /,
    );
    expect(await state.getAttribute("class")).toBe("state bad");
    const spec = page.locator('main tr[data-key="schedule reports.paris"] td.spec');
    expect(await spec.textContent()).toBe("every 30s (edited; the code says cron 0 3 * * * Europe/Paris)");
    expect(await page.locator('main tr[data-key="schedule reports.paris"] td.state').textContent()).toBe(
      "active",
    );
    expect(cp.pageErrors).toEqual([]);
  });
});
