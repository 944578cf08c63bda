// The Console page in headless Chromium terminates runs: a held-back run and a sleeping one, each confirmed (one with a reason), then shown failed with OKE1339; a held run offers no button.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Page } from "playwright-core";
import { LONG, openConsolePage, type ConsolePage } from "../support/console-browser.ts";
import { until } from "../conformance/app-fixture.ts";
import { heldTrial, startedByPreviousVersion } from "../support/held-back.ts";
import { createApp } from "../../src/app/app.ts";
import type { App } from "../../src/app/types.ts";
import { createTimeTravel } from "../../src/clock/time-travel.ts";
import { flow } from "../../src/index.ts";
import { createMemoryStore } from "../../src/store/memory/memory-store.ts";
import type { Store } from "../../src/store/types.ts";

const TOKEN = "browser-terminate-token-0123456789";
/** 2023-11-14 22:13:20 UTC. Time stands still unless the test moves it. */
const T0 = 1_700_000_000_000;

const napper = flow("trials.nap", {
  durable: true,
  do: async (_: { n: number }, fx) => {
    await fx.clock.sleep("nap", "1d");
  },
});

describe("terminating runs on the Console page", () => {
  const time = createTimeTravel(T0);
  let store: Store;
  let consoleApp: App;
  let cp: ConsolePage;
  let page: Page;
  let heldId: string;
  let napId: string;

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
    const url = (await consoleApp.start({ port: 0, host: "127.0.0.1" })).console!.url;
    heldId = await startedByPreviousVersion(store, time);
    await consoleApp.invoke(napper, { n: 2 });
    napId = (await store.listRuns({ flow: "trials.nap", status: "sleeping" }))[0]!.id;
    time.advance(60_000);
    await until(async () => (await store.getRun(heldId))?.held !== undefined, "the run held back");
    cp = await openConsolePage(url, TOKEN);
    page = cp.page;
  });
  afterAll(async () => {
    await cp?.close();
    await consoleApp?.stop({ timeoutMs: 2_000 });
    await store?.close();
  });

  const button = () => page.getByRole("button", { name: "Terminate" });

  it("a held-back run: Terminate asks first (cancel changes nothing), then ends it failed with OKE1339 and the reason", async () => {
    await cp.open(`#/run/${encodeURIComponent(heldId)}`, `Run ${heldId}`);
    await button().waitFor(LONG);
    const question = `Terminate run ${heldId}? It ends failed for good (OKE1339) and its undos do not run.`;

    cp.answer = false;
    await button().click();
    await expect.poll(() => cp.dialogs.at(-1), LONG).toBe(question);
    expect((await store.getRun(heldId))?.status).toBe("running");

    cp.answer = true;
    await page.getByLabel("Reason to terminate").fill("the flow changed on purpose");
    await button().click();
    await until(async () => (await page.locator("#run-status").textContent()) === "failed", "shown failed");
    expect(cp.dialogs.at(-1)).toBe(question);
    const error = "OKE1339: terminated by alice at 2023-11-14T22:14:20.000Z: the flow changed on purpose";
    await page.locator("main p.bad", { hasText: error }).waitFor(LONG);
    expect(await page.locator("#held").count()).toBe(0);
    expect(await button().count()).toBe(0);
    expect(await store.getRun(heldId)).toMatchObject({
      status: "failed",
      error: {
        code: "OKE1339",
        message: "terminated by alice at 2023-11-14T22:14:20.000Z: the flow changed on purpose",
      },
    });
    expect(cp.pageErrors).toEqual([]);
    expect(cp.cspViolations).toEqual([]);
  });

  it("a sleeping run, with no reason; a run someone holds offers no Terminate", async () => {
    await cp.open(`#/run/${encodeURIComponent(napId)}`, `Run ${napId}`);
    await button().click();
    await until(async () => (await page.locator("#run-status").textContent()) === "failed", "shown failed");
    await page
      .locator("main p.bad", { hasText: "OKE1339: terminated by alice at 2023-11-14T22:14:20.000Z" })
      .waitFor(LONG);
    expect((await store.getRun(napId))?.error?.message).toBe(
      "terminated by alice at 2023-11-14T22:14:20.000Z",
    );

    await store.startRun({
      id: "busy",
      flow: "trials.gone",
      input: 1,
      parentRunId: null,
      owner: "other/1",
      now: time.now(),
      leaseMs: 60_000,
    });
    await cp.open("#/run/busy", "Run busy");
    expect(await page.locator("#run-status").textContent()).toBe("running");
    expect(await button().count()).toBe(0);
    expect(cp.pageErrors).toEqual([]);
  });
});
