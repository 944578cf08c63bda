// The Console page in headless Chromium on a stranded run (a banner with the fix, no Wake now, a passed wake time said due) and on held-back runs in the overview's flows table (apart from running, "+" past the count).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Page } from "playwright-core";
import { LONG, openConsolePage, type ConsolePage } from "../support/console-browser.ts";
import { until } from "../conformance/app-fixture.ts";
import { heldTrial, startedByPreviousVersion } from "../support/held-back.ts";
import { createApp } from "../../src/app/app.ts";
import type { App } from "../../src/app/types.ts";
import { createTimeTravel } from "../../src/clock/time-travel.ts";
import { heldLimits } from "../../src/console/api.ts";
import { flow } from "../../src/index.ts";
import { createMemoryStore } from "../../src/store/memory/memory-store.ts";
import type { Store } from "../../src/store/types.ts";

/** 2023-11-14 22:13:20 UTC. Time stands still unless the test moves it. */
const T0 = 1_700_000_000_000;

describe("a stranded sleeping run on the Console page", () => {
  const TOKEN = "browser-stranded-run-token-0123456789";
  // A name that would be markup if the page ever wrote it as HTML.
  const FLOW = "legacy.<i>nap</i>";
  const legacyNap = flow(FLOW, {
    durable: true,
    do: async (_: { n: number }, fx) => {
      await fx.clock.sleep("trial-end", "1h");
    },
  });
  const current = flow("current.flow", {
    durable: true,
    do: async (_: unknown, fx) => fx.step("s", () => 1),
  });
  const time = createTimeTravel(T0);
  let store: Store;
  let consoleApp: App;
  let url: string;
  let cp: ConsolePage;
  let page: Page;
  let runId: string;

  beforeAll(async () => {
    store = createMemoryStore();
    // The app that had the flow starts a run, which sleeps until T0 + 1 h, and is gone for good.
    const legacy = createApp({ modules: [{ legacyNap }], env: "test", clock: time, store });
    await legacy.start({ port: 0, host: "127.0.0.1" });
    await legacy.invoke(legacyNap, { n: 1 });
    await legacy.stop();
    runId = (await store.listRuns({ flow: FLOW, status: "sleeping" }))[0]!.id;
    // The Console's app, live, has no such flow.
    consoleApp = createApp({
      modules: [{ current }],
      env: "test",
      clock: time,
      store,
      config: { console: { port: 0, tokens: { alice: TOKEN } } },
    });
    url = (await consoleApp.start({ port: 0, host: "127.0.0.1" })).console!.url;
    cp = await openConsolePage(url, TOKEN);
    page = cp.page;
  });
  afterAll(async () => {
    await cp?.close();
    await consoleApp?.stop({ timeoutMs: 2_000 });
    await store?.close();
  });

  it("says it is stranded and what to do, offers no Wake now, and says due since once its wake time passed", async () => {
    await cp.open(`#/run/${encodeURIComponent(runId)}`, `Run ${runId}`);
    const banner = page.getByRole("region", { name: `Stranded: no live instance has flow ${FLOW}` });
    await banner.waitFor(LONG);
    expect(await banner.locator("p").first().textContent()).toBe(
      "Waking it would only move its wake time: nothing resumes it while no live instance has its flow, so Wake now is not offered.",
    );
    expect(await banner.locator("p.fix").textContent()).toBe(
      `It resumes where it stopped once an instance that has the flow runs (deploy it again). If the flow was removed on purpose, end the run with oke terminate ${runId} (its undos do not run).`,
    );
    // The name is text, never markup.
    expect(await banner.locator("i").count()).toBe(0);
    // No Wake now at all (not even a disabled one); Terminate stays, the fix's other way out.
    expect(await page.getByRole("button", { name: "Wake now" }).count()).toBe(0);
    expect(await page.getByRole("button", { name: "Terminate" }).isEnabled()).toBe(true);
    const statusLine = page.locator("#run-status").locator("xpath=..");
    expect(await statusLine.textContent()).toContain(
      'status sleeping on "trial-end" until 2023-11-14 23:13:20 · stranded ·',
    );

    // Its wake time passes: nothing wakes it, and the page says it is due rather than pending.
    time.advance("2h");
    await page.locator("#run-status").locator("xpath=..", { hasText: "due since" }).waitFor(LONG);
    expect(await statusLine.textContent()).toContain(
      'status sleeping on "trial-end", due since 2023-11-14 23:13:20 · stranded ·',
    );
    expect(await statusLine.textContent()).not.toContain("until");
    await banner.waitFor(LONG);
    expect(await page.getByRole("button", { name: "Wake now" }).count()).toBe(0);
    expect((await store.getRun(runId))?.status).toBe("sleeping");
    expect(cp.pageErrors).toEqual([]);
    expect(cp.cspViolations).toEqual([]);
  });
});

describe("held-back runs in the overview's flows table", () => {
  const TOKEN = "browser-held-flows-token-0123456789";
  // Sleeps past the test's clock: a sleeping run beside the held ones, never held.
  const napper = flow("trials.nap", {
    durable: true,
    do: async (_: { n: number }, fx) => {
      await fx.clock.sleep("nap", "1d");
    },
  });
  const time = createTimeTravel(T0);
  let store: Store;
  let consoleApp: App;
  let url: string;
  let cp: ConsolePage;
  let page: Page;
  let heldId: string;
  const runsCell = (flowName: string) => page.locator(`main tr[data-key="flow ${flowName}"] td`).nth(3);

  beforeAll(async () => {
    store = createMemoryStore();
    consoleApp = createApp({
      modules: [{ now: heldTrial("b"), napper }],
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

  it("shows a held-back run as held back, not running, linked to the flow's held-back runs", async () => {
    await runsCell("trials.held").waitFor(LONG);
    time.advance(60_000);
    await until(async () => (await store.getRun(heldId))?.held !== undefined, "the run held back");
    // Still running in the store's counts (and in the API's `runs`), but nobody works it.
    await page.getByRole("region", { name: "Held back" }).waitFor(LONG);
    await runsCell("trials.held").locator("a.held").waitFor(LONG);
    expect(await runsCell("trials.held").textContent()).toBe("held back 1");
    expect(await runsCell("trials.nap").textContent()).toBe("sleeping 1");
    const held = runsCell("trials.held").getByRole("link", { name: "1 held-back run of trials.held" });
    expect(await held.getAttribute("href")).toBe("#/runs?flow=trials.held&status=held");

    await held.click();
    await page.locator('main > [data-key="view #/runs?flow=trials.held&status=held"]').waitFor(LONG);
    await until(async () => (await page.locator("main tbody tr").count()) === 1, "only the held run");
    expect(await page.locator("main tbody tr").getAttribute("data-key")).toBe(heldId);
    expect(cp.pageErrors).toEqual([]);
    expect(cp.cspViolations).toEqual([]);
  });
});

describe("more held-back runs than the overview counts", () => {
  const TOKEN = "browser-held-more-token-0123456789";
  const time = createTimeTravel(T0);
  const counted = heldLimits.counted;
  let store: Store;
  let consoleApp: App;
  let cp: ConsolePage;

  beforeAll(async () => {
    store = createMemoryStore();
    // The previous version of the code starts 21 runs (more than the overview lists, 20), and stops.
    const then = heldTrial("a");
    const previous = createApp({ modules: [{ then }], env: "test", clock: time, store });
    await previous.start({ port: 0, host: "127.0.0.1" });
    for (let n = 0; n < 21; n++) await previous.invoke(then, { n });
    await previous.stop();
    consoleApp = createApp({
      modules: [{ now: heldTrial("b") }],
      env: "test",
      clock: time,
      store,
      config: { console: { port: 0, tokens: { alice: TOKEN } } },
    });
    const url = (await consoleApp.start({ port: 0, host: "127.0.0.1" })).console!.url;
    time.advance(60_000);
    await until(
      async () => (await store.pageRuns({ held: true, limit: 100 })).items.length === 21,
      "21 runs held back",
    );
    // The overview counts 20 of them at most.
    heldLimits.counted = 20;
    cp = await openConsolePage(url, TOKEN);
  });
  afterAll(async () => {
    heldLimits.counted = counted;
    await cp?.close();
    await consoleApp?.stop({ timeoutMs: 2_000 });
    await store?.close();
  });

  it('marks the held-back count "+", the uncounted rest left under running', async () => {
    const cell = cp.page.locator(`main tr[data-key="flow trials.held"] td`).nth(3);
    await cell.locator("a.held").waitFor(LONG);
    expect(await cell.textContent()).toBe("running 1 · held back 20+");
    expect(await cell.getByRole("link", { name: "20+ held-back runs of trials.held" }).count()).toBe(1);
    expect(cp.pageErrors).toEqual([]);
    expect(cp.cspViolations).toEqual([]);
  });
});
