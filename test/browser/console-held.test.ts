// The Console page in headless Chromium shows runs held back by a deploy (their journal no longer matches the code): the overview's panel, the run's banner, the runs list and its filter.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Page } from "playwright-core";
import { LONG, openConsolePage, type ConsolePage } from "../support/console-browser.ts";
import { until } from "../conformance/app-fixture.ts";
import { heldTrial, startedByPreviousVersion } from "../support/held-back.ts";
import { createApp } from "../../src/app/app.ts";
import type { App } from "../../src/app/types.ts";
import { createTimeTravel } from "../../src/clock/time-travel.ts";
import { MISMATCH_FIX } from "../../src/durable/mismatch-log.ts";
import { flow } from "../../src/index.ts";
import { createMemoryStore } from "../../src/store/memory/memory-store.ts";
import type { Store } from "../../src/store/types.ts";

const TOKEN = "browser-held-token-0123456789";
/** 2023-11-14 22:13:20 UTC. Time stands still unless the test moves it. */
const T0 = 1_700_000_000_000;

// Sleeps past the test's clock: running beside the held run, never held.
const napper = flow("trials.nap", {
  durable: true,
  do: async (_: { n: number }, fx) => {
    await fx.clock.sleep("nap", "1d");
  },
});

describe("held-back runs on the Console page", () => {
  const time = createTimeTravel(T0);
  let store: Store;
  let consoleApp: App;
  let url: string;
  let cp: ConsolePage;
  let page: Page;
  let heldId: string;

  beforeAll(async () => {
    store = createMemoryStore();
    const now = heldTrial("b");
    consoleApp = createApp({
      modules: [{ now, napper }],
      env: "test",
      clock: time,
      store,
      config: { console: { port: 0, tokens: { alice: TOKEN } } },
    });
    url = (await consoleApp.start({ port: 0, host: "127.0.0.1" })).console!.url;
    // The previous version of the code started the run; it sleeps until T0 + 1 min.
    heldId = await startedByPreviousVersion(store, time);
    await consoleApp.invoke(napper, { n: 2 });
    cp = await openConsolePage(url, TOKEN);
    page = cp.page;
  });
  afterAll(async () => {
    await cp?.close();
    await consoleApp?.stop({ timeoutMs: 2_000 });
    await store?.close();
  });

  it("the overview shows a Held back panel only while runs are held back: each linked, since when, why, and what to do", async () => {
    await page.getByRole("heading", { name: "Signals" }).waitFor(LONG);
    expect(await page.locator("#held-back").count()).toBe(0);

    time.advance(60_000);
    await until(async () => (await store.getRun(heldId))?.held !== undefined, "the run held back");
    const panel = page.getByRole("region", { name: "Held back" });
    await panel.waitFor(LONG);
    const item = panel.locator(`li[data-key="held ${heldId}"]`);
    expect(await item.textContent()).toBe(
      `${heldId} (trials.held) held back since 2023-11-14 22:14:20: OKE1301 journal: run "${heldId}" recorded step "a" at position 0, but the code now asks for step "b"`,
    );
    expect(await panel.locator("li").count()).toBe(1);
    expect(await item.getByRole("link").getAttribute("href")).toBe(`#/run/${encodeURIComponent(heldId)}`);
    expect(await panel.locator("p.fix").textContent()).toBe(MISMATCH_FIX);
    expect(await panel.getByRole("link", { name: "all held-back runs" }).getAttribute("href")).toBe(
      "#/runs?status=held",
    );

    // The run's own page: a banner with the reason, since when, and what to do.
    await item.getByRole("link").click();
    await page.getByRole("heading", { name: `Run ${heldId}` }).waitFor(LONG);
    const banner = page.getByRole("region", { name: "Held back: not failed, waiting for matching code" });
    await banner.waitFor(LONG);
    expect(await banner.locator("p").first().textContent()).toBe(
      `Since 2023-11-14 22:14:20: OKE1301 journal: run "${heldId}" recorded step "a" at position 0, but the code now asks for step "b"`,
    );
    expect(await banner.locator("p.fix").textContent()).toMatch(/^It is tried again every 30 s and goes on /);
    expect(await banner.locator("p.fix").textContent()).toBe(MISMATCH_FIX);
    expect(await page.locator("#run-status").textContent()).toBe("running");
    expect(await page.locator("#run-status").locator("xpath=..").textContent()).toContain(
      "status running · held back",
    );
    expect(cp.pageErrors).toEqual([]);
    expect(cp.cspViolations).toEqual([]);
  });

  it("the runs list marks a held run and its filter offers held back", async () => {
    await cp.open("#/runs", "Runs");
    const status = (id: string) => page.locator(`main tr[data-key="${id}"] td`).nth(2);
    await status(heldId).waitFor(LONG);
    expect(await status(heldId).textContent()).toBe("running · held back");
    expect(await status(heldId).getAttribute("class")).toBe("held");
    const napId = (await store.listRuns({ status: "sleeping" })).find((r) => r.flow === "trials.nap")!.id;
    expect(await status(napId).textContent()).toBe("sleeping");

    await page.getByLabel("Status").selectOption({ label: "held back" });
    await page.getByRole("button", { name: "Filter" }).click();
    await page.locator('main > [data-key="view #/runs?status=held"]').waitFor(LONG);
    await until(async () => (await page.locator("main tbody tr").count()) === 1, "only the held run");
    expect(await page.locator("main tbody tr").getAttribute("data-key")).toBe(heldId);
    expect(await page.getByLabel("Status").inputValue()).toBe("held");
    expect(cp.pageErrors).toEqual([]);
    expect(cp.cspViolations).toEqual([]);
  });
});
