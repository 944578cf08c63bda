// The Console page in headless Chromium warns on the overview about work no live instance serves: names and counts, escaped, gone once served again.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Page } from "playwright-core";
import { LONG, openConsolePage, type ConsolePage } from "../support/console-browser.ts";
import { until } from "../conformance/app-fixture.ts";
import { createApp } from "../../src/app/app.ts";
import type { App } from "../../src/app/types.ts";
import { clock, flow, on, signal } from "../../src/index.ts";
import { createMemoryStore } from "../../src/store/memory/memory-store.ts";
import type { Store } from "../../src/store/types.ts";

const TOKEN = "browser-stranded-token-0123456789";

// Names are any non-empty string: these would be markup if the page ever wrote them as HTML.
const FLOW = "legacy.<b>wait</b>";
const SIGNAL = 'legacy.jobs"><img src=x>';
const legacyJobs = signal.once<{ n: number }>(SIGNAL, { retries: 0 });
const legacyWorker = on(legacyJobs, flow("legacy.work", { do: () => undefined }));
// A signal only the legacy app knows: the Console's app does not declare it at all.
const goneJobs = signal.once("gone.jobs");
// Its payload `{ fail: true }` fails every attempt: the legacy app leaves a dead letter behind.
const goneWorker = on(
  goneJobs,
  flow("gone.work", {
    do: (p: unknown) => {
      if ((p as { fail?: boolean }).fail === true) throw new Error("gone worker refused");
    },
  }),
);
const legacyWait = flow(FLOW, {
  durable: true,
  do: async (_: { n: number }, fx) => {
    await fx.clock.sleep("trial-end", "1h");
  },
});
// A clock only the legacy app declares: once it is gone, nothing fires it.
const legacyTick = on(clock("legacy.tick", { every: "1s" }), flow("legacy.tick", { do: () => undefined }));
// The Console's app declares the signal to emit it (a web app: no worker bound here).
const jobsToEmit = signal.once<{ n: number }>(SIGNAL, { retries: 0, optional: true });
const current = flow("current.flow", { durable: true, do: async (_: unknown, fx) => fx.step("s", () => 1) });

describe("stranded work on the Console page", () => {
  let store: Store;
  let consoleApp: App;
  let legacy: App | undefined;
  let url: string;
  let cp: ConsolePage;
  let page: Page;
  const startLegacy = async (): Promise<App> => {
    const app = createApp({
      modules: [{ legacyJobs, legacyWorker, legacyWait, goneJobs, goneWorker, legacyTick }],
      env: "test",
      store,
    });
    await app.start({ port: 0, host: "127.0.0.1" });
    return app;
  };

  beforeAll(async () => {
    store = createMemoryStore();
    consoleApp = createApp({
      modules: [{ current, jobsToEmit }],
      env: "test",
      store,
      config: { console: { port: 0, tokens: { alice: TOKEN } } },
    });
    url = (await consoleApp.start({ port: 0, host: "127.0.0.1" })).console!.url;
    legacy = await startLegacy();
    for (let n = 0; n < 2; n++) await legacy.invoke(legacyWait, { n });
    await legacy.emit(goneJobs, { fail: true });
    await until(
      async () => (await store.stats("gone.jobs", Date.now())).dead === 1,
      "gone.jobs' dead letter",
    );
    cp = await openConsolePage(url, TOKEN);
    page = cp.page;
  });
  afterAll(async () => {
    await cp?.close();
    await legacy?.stop({ timeoutMs: 2_000 });
    await consoleApp?.stop({ timeoutMs: 2_000 });
    await store?.close();
  });

  it("shows a warning with the names and counts while no live instance serves them, escaped; gone once one does", async () => {
    // Everything served: no warning.
    await page.getByRole("heading", { name: "Signals" }).waitFor(LONG);
    expect(await page.locator("#stranded").count()).toBe(0);

    await legacy!.stop();
    legacy = undefined;
    for (let n = 0; n < 3; n++) await consoleApp.emit(jobsToEmit, { n });
    // Waiting on a signal the Console's app does not declare (only the stopped legacy app consumes it).
    await store.enqueue(
      [{ id: "gone-1", signal: "gone.jobs", key: null, payload: {}, parentRunId: null }],
      Date.now(),
    );
    const banner = page.getByRole("region", { name: "Stranded work: no live instance serves it" });
    await banner.waitFor(LONG);
    const flowItem = banner.locator("li", { hasText: FLOW });
    const signalItem = banner.locator("li", { hasText: SIGNAL });
    await signalItem.waitFor(LONG);
    expect(await flowItem.textContent()).toMatch(
      /^legacy\.<b>wait<\/b>: 2 runs \(sleeping 2, next due .+\) — no live instance runs this flow\. See them$/,
    );
    expect(await signalItem.textContent()).toMatch(
      /^legacy\.jobs"><img src=x>: 3 pending, oldest .+ — no live instance consumes this signal\. See them$/,
    );
    // The names are text, never markup.
    expect(await banner.locator("b, img").count()).toBe(0);
    expect(await flowItem.getByRole("link").getAttribute("href")).toBe(
      `#/runs?flow=${encodeURIComponent(FLOW)}`,
    );
    expect(await signalItem.getByRole("link").getAttribute("href")).toBe(
      `#/signal/${encodeURIComponent(SIGNAL)}`,
    );
    // A signal this app does not declare is named as such, and links to its page all the same.
    const goneItem = banner.locator("li", { hasText: "gone.jobs" });
    expect(await goneItem.textContent()).toMatch(
      /^gone\.jobs: 1 pending, oldest .+ — no live instance consumes this signal, and this app does not declare it\. See them$/,
    );
    expect(await goneItem.getByRole("link").getAttribute("href")).toBe("#/signal/gone.jobs");
    // A clock whose every declarer is gone: still active, its slot passed, nothing fires it.
    const clockItem = banner.locator("li", { hasText: "legacy.tick" });
    await clockItem.waitFor(LONG);
    expect(await clockItem.textContent()).toMatch(
      /^legacy\.tick: clock every 1s, due since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d, (never fired|last fired \d{4}-.+) — active, but no live instance declares it, so nothing fires it\. Deploy an instance whose code declares this clock: .+ pause it: the next boot of the app marks it orphaned\. See schedules$/,
    );
    expect(await clockItem.getByRole("link").getAttribute("href")).toBe("#/schedules");

    legacy = await startLegacy();
    await until(async () => (await page.locator("#stranded").count()) === 0, "the warning gone");
    expect(cp.pageErrors).toEqual([]);
  });

  it("a signal this app does not declare has a page: its messages and dead letters, discard but no replay", async () => {
    await page.goto(`${url}/#/signal/gone.jobs`);
    await page.getByRole("heading", { name: "Signal gone.jobs" }).waitFor(LONG);
    expect(await page.locator("#undeclared").textContent()).toMatch(
      /^This app does not declare gone\.jobs: .+replay needs an app that declares the signal\.$/,
    );
    await page.locator("#signal-counts", { hasText: "dead 1 " }).waitFor(LONG);
    // Dead letters (the default tab): discard offered, replay not.
    const actions = page.locator("p.actions");
    await actions.waitFor(LONG);
    expect(await actions.getByRole("button").allTextContents()).toEqual(["Discard selected", "Discard all"]);
    const deadId = (await page.locator("input[name=pick]").first().getAttribute("value", LONG))!;
    // The dead letter's own view offers no replay either.
    await page.goto(`${url}/#/message/${encodeURIComponent(deadId)}`);
    await page.getByRole("heading", { name: "Failure history" }).waitFor(LONG);
    expect(await page.locator("#message-status").textContent()).toBe("dead");
    expect(await page.getByRole("button", { name: "Replay this message" }).count()).toBe(0);
    // Discarding it (confirmed) clears it from the store.
    await page.goto(`${url}/#/signal/gone.jobs`);
    await page.locator("input[name=pick]").first().check(LONG);
    await page.getByRole("button", { name: "Discard selected" }).click();
    await page.locator("#status", { hasText: "Discarded 1 message(s) of gone.jobs." }).waitFor(LONG);
    expect(cp.dialogs.at(-1)).toMatch(/^Discard 1 dead letter\(s\) of gone\.jobs\?/);
    await page.locator("#signal-counts", { hasText: "dead 0 " }).waitFor(LONG);
    expect((await store.stats("gone.jobs", Date.now())).dead).toBe(0);
    expect(cp.pageErrors).toEqual([]);
  });

  it("its pending tab discards pending messages (selected, or all), confirmed; the inflight one stays", async () => {
    // A queue nothing in either app consumes: two pending messages and one held by a worker.
    const signal = "gone.queue";
    await store.enqueue(
      ["q-1", "q-2", "q-3"].map((id) => ({ id, signal, key: null, payload: {}, parentRunId: null })),
      Date.now(),
    );
    const [held] = await store.claim({ signal, worker: "w", max: 1, now: Date.now(), leaseMs: 3_600_000 });
    expect(held!.id).toBe("q-1");
    await page.goto(`${url}/#/signal/${signal}?status=pending`);
    await page.locator("#signal-counts", { hasText: "pending 2 · in flight 1 " }).waitFor(LONG);
    const actions = page.locator("p.actions");
    expect(await actions.getByRole("button").allTextContents()).toEqual([
      "Discard selected",
      "Discard all pending",
    ]);
    await page.getByRole("checkbox", { name: "select message q-2" }).check(LONG);
    await page.getByRole("button", { name: "Discard selected" }).click();
    await page.locator("#status", { hasText: `Discarded 1 pending message(s) of ${signal}.` }).waitFor(LONG);
    expect(cp.dialogs.at(-1)).toBe(
      `Discard 1 pending message(s) of ${signal}? They are deleted for good and never delivered.`,
    );
    expect(await store.getMessage("q-2")).toBeUndefined();
    await page.locator("#signal-counts", { hasText: "pending 1 · in flight 1 " }).waitFor(LONG);
    // The same status line as before: wait for the store, not the line.
    await page.getByRole("button", { name: "Discard all pending" }).click();
    await until(async () => (await store.getMessage("q-3")) === undefined, "q-3 discarded");
    expect(cp.dialogs.at(-1)).toBe(
      `Discard all 1 pending message(s) of ${signal}? They are deleted for good and never delivered.`,
    );
    await page.locator("#signal-counts", { hasText: "pending 0 · in flight 1 " }).waitFor(LONG);
    expect(await store.getMessage("q-3")).toBeUndefined();
    expect(await store.getMessage("q-1")).toMatchObject({ status: "inflight" });
    // Nothing left to discard: said, and no dialog asked.
    const asked = cp.dialogs.length;
    await page.getByRole("button", { name: "Discard all pending" }).click();
    await page.locator("#status", { hasText: `No pending messages to discard on ${signal}.` }).waitFor(LONG);
    expect(cp.dialogs.length).toBe(asked);
    expect(cp.pageErrors).toEqual([]);
  });
});
