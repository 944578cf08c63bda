// The Console page's paced replays in headless Chromium: started from a signal's dead letters at a rate, shown with progress on the signal and the overview, stopped with a button.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Page } from "playwright-core";
import { consoleApi, LONG, openConsolePage, type ConsolePage } from "../support/console-browser.ts";
import { createApp } from "../../src/app/app.ts";
import type { App } from "../../src/app/types.ts";
import type { ReplayJob } from "../../src/console/replay-jobs.ts";
import { flow, on, signal } from "../../src/index.ts";
import { createMemoryStore } from "../../src/store/memory/memory-store.ts";

const TOKEN = "browser-test-token-0123456789";
const SIGNAL = "mail.send";

let down = true;
const mail = signal.once<{ n: number }>(SIGNAL, { retries: 0 });
const sender = on(
  mail,
  flow("mail.sender", {
    do: () => {
      if (down) throw new Error("SMTP relay refused the connection");
    },
  }),
);

describe("paced replays on the Console page", () => {
  let app: App;
  let url: string;
  let cp: ConsolePage;
  let page: Page;
  const jobs = async () => (await consoleApi(url, TOKEN).get<{ jobs: ReplayJob[] }>("/api/replays")).jobs;

  beforeAll(async () => {
    app = createApp({
      modules: [{ mail, sender }],
      env: "test",
      store: createMemoryStore(),
      config: { console: { port: 0, tokens: { alice: TOKEN } } },
    });
    url = (await app.start({ port: 0, host: "127.0.0.1" })).console!.url;
    for (let n = 1; n <= 12; n++) await app.emit(mail, { n });
    await app.idle();
    down = false;
    cp = await openConsolePage(url, TOKEN);
    page = cp.page;
  });
  afterAll(async () => {
    await cp?.close();
    await app?.stop({ timeoutMs: 2_000 });
  });

  it("refuses a rate that is not a number with the API's words, and sends nothing", async () => {
    await cp.open(`#/signal/${SIGNAL}`, `Signal ${SIGNAL}`);
    cp.typed = "fast";
    await page.getByRole("button", { name: "Replay all at a pace…" }).click();
    await page
      .locator("#status.bad", {
        hasText:
          /^Replay all at a pace failed: OKE1605: console: "rate" must be a number of messages per second/,
      })
      .waitFor(LONG);
    expect(cp.dialogs.at(-1)).toBe(
      `Replay all dead letters of ${SIGNAL} at how many a second? (0.5 is one every 2 s)`,
    );
    expect(await jobs()).toEqual([]);
  });

  it("starts a replay at the rate typed, confirmed with the count, and shows its progress", async () => {
    // One an hour, nearly the slowest rate the API takes: the first goes at once and the next not
    // for 55 minutes, so the job is still running, at 1 of 12, whatever this machine's speed.
    cp.typed = "0.0003";
    cp.answer = true;
    const asked = cp.dialogs.length;
    await page.getByRole("button", { name: "Replay all at a pace…" }).click();
    await page
      .locator("#status", { hasText: `Replaying 12 dead letter(s) of ${SIGNAL} at 0.0003 a second (job 1)` })
      .waitFor(LONG);
    expect(cp.dialogs.slice(asked)).toEqual([
      `Replay all dead letters of ${SIGNAL} at how many a second? (0.5 is one every 2 s)`,
      `Replay 12 dead letter(s) of ${SIGNAL} at 0.0003 a second, in the background?`,
    ]);
    const row = page.locator('#paced-replays + .scroll tr[data-key="replay 1"]');
    await row.locator("td", { hasText: "1 of 12 replayed" }).waitFor(LONG);
    expect(await row.locator("td").allTextContents()).toEqual([
      "1",
      "1 of 12 replayed",
      "one every 3,333.3333 s",
      "running",
      expect.stringMatching(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/),
      "alice",
      "Stop",
    ]);
    await expect.poll(async () => (await app.operator.stats(SIGNAL)).dead).toBe(11);
  });

  it("lists it on the overview with its signal, and stops it there: nothing more is sent", async () => {
    await cp.open("#/", "Overview");
    const row = page.locator('#paced-replays + .scroll tr[data-key="replay 1"]');
    await row.waitFor(LONG);
    expect(await row.getByRole("link", { name: `signal ${SIGNAL}` }).getAttribute("href")).toBe(
      `#/signal/${SIGNAL}`,
    );
    cp.answer = true;
    await row.getByRole("button", { name: "stop replay 1" }).click();
    await page
      .locator("#status", { hasText: `Stopped paced replay 1 of ${SIGNAL}: 1 of 12 replayed.` })
      .waitFor(LONG);
    expect(cp.dialogs.at(-1)).toBe(`Stop paced replay 1 of ${SIGNAL}? Those replayed so far stay replayed.`);
    await row.locator("td", { hasText: /^stopped$/ }).waitFor(LONG);
    expect(await row.getByRole("button").count()).toBe(0);
    expect((await jobs()).map((j) => [j.id, j.state, j.replayed])).toEqual([[1, "stopped", 1]]);
    expect((await app.operator.stats(SIGNAL)).dead).toBe(11);
    expect(cp.pageErrors).toEqual([]);
    expect(cp.cspViolations).toEqual([]);
  });
});
