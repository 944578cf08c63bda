// The Console page on a 375 × 812 phone in headless Chromium: key columns on screen, the status line under the header and never stale, a refused Runs filter kept beside its form.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Locator, Page } from "playwright-core";
import { consoleApi, LONG, openConsolePage, type ConsolePage } from "../support/console-browser.ts";
import { createApp } from "../../src/app/app.ts";
import type { App } from "../../src/app/types.ts";
import { flow, on, signal } from "../../src/index.ts";
import { createMemoryStore } from "../../src/store/memory/memory-store.ts";

const TOKEN = "browser-phone-token-0123456789";
const PHONE = { width: 375, height: 812 };

// Browser globals in evaluate callbacks, typed just enough: the project compiles without the DOM lib.
declare const window: {
  getComputedStyle(el: unknown, pseudo?: string): { content: string; display: string };
};

// Every attempt fails with a sentence-long message: the failure history's Message column must hold it.
const jobs = signal.once<{ n: number }>("jobs.run", { retries: 1 });
const runJobs = on(
  jobs,
  flow("jobs.work", {
    do: ({ n }: { n: number }) => {
      throw Object.assign(new Error(`job ${n} failed: the payment provider answered 502 Bad Gateway`), {
        code: "E_PAYMENT",
      });
    },
  }),
);
const waiting = flow("trial.wait", {
  durable: true,
  do: async (_: { user: string }, fx) => {
    await fx.clock.sleep("trial-expiry", "7d");
  },
});

/** The element's box, which must exist. */
async function box(l: Locator): Promise<{ x: number; y: number; width: number; height: number }> {
  const b = await l.boundingBox();
  expect(b, "an element on screen").not.toBeNull();
  return b!;
}

describe("the Console page on a 375 px phone", () => {
  let app: App;
  let url: string;
  let cp: ConsolePage;
  let page: Page;
  const statusLine = () => page.locator("#status");

  /** Each named column's header, and its first body cell, lie inside the viewport's width. */
  async function onScreen(table: Locator, columns: string[]): Promise<void> {
    const headers = await table.locator("thead th").allTextContents();
    for (const name of columns) {
      const i = headers.indexOf(name);
      expect(i, `column ${name}`).toBeGreaterThanOrEqual(0);
      for (const cell of [
        table.locator("thead th").nth(i),
        table.locator("tbody tr").first().locator("td").nth(i),
      ]) {
        const b = await box(cell);
        expect(b.x, `${name} starts on screen`).toBeGreaterThanOrEqual(0);
        expect(b.x + b.width, `${name} ends on screen`).toBeLessThanOrEqual(PHONE.width);
      }
    }
  }

  beforeAll(async () => {
    app = createApp({
      modules: [{ jobs, runJobs, waiting }],
      env: "test",
      store: createMemoryStore(),
      config: { console: { port: 0, tokens: { alice: TOKEN } } },
    });
    url = (await app.start({ port: 0, host: "127.0.0.1" })).console!.url;
    for (let n = 1; n <= 2; n++) await app.emit(jobs, { n }, { id: `m_job_${n}` });
    await app.invoke(waiting, { user: "ada" });
    await app.idle();
    cp = await openConsolePage(url, TOKEN, { viewport: PHONE });
    page = cp.page;
  });
  afterAll(async () => {
    await cp?.close();
    await app?.stop({ timeoutMs: 2_000 });
  });

  it("shows the columns that matter on screen: signal counts, a run's status, a failure's message", async () => {
    await cp.open("#/", "Overview");
    const signals = page.locator("main table").first();
    await signals
      .locator("tbody tr", { hasText: "jobs.run" })
      .locator("td.bad", { hasText: "2" })
      .waitFor(LONG);
    await onScreen(signals, ["Signal", "Pending", "Dead", "Delivered"]);
    // The rest of the table is a sideways scroll away, and the page says so.
    const cue = await page
      .locator("main .scroll")
      .first()
      .evaluate((el) => window.getComputedStyle(el, "::before").content);
    expect(cue).toBe('"Scroll sideways for more columns →"');

    await cp.open("#/runs", "Runs");
    const runs = page.locator("main table");
    await runs.locator("tbody tr", { hasText: "trial.wait" }).waitFor(LONG);
    await onScreen(runs, ["Run", "Flow", "Status"]);

    await cp.open("#/message/m_job_1", "Message m_job_1");
    const history = page.locator("main table");
    await history.locator("tbody tr").first().waitFor(LONG);
    await onScreen(history, ["Attempt", "When", "Code", "Message"]);
    // Room to read it: wider than a few characters (about 17 at 14 px), the sentence wrapped, not cut.
    const message = history.locator("tbody tr").first().locator("td").nth(3);
    expect((await box(message)).width).toBeGreaterThanOrEqual(120);
    expect(await message.textContent()).toBe("job 1 failed: the payment provider answered 502 Bad Gateway");
    expect(cp.pageErrors).toEqual([]);
  });

  it("puts the status line under the header, over nothing, and clears it when an action is cancelled", async () => {
    await cp.open("#/signal/jobs.run", "Signal jobs.run");
    await page.locator("input[name=pick]").first().waitFor(LONG);
    await page.getByRole("button", { name: "Replay selected" }).click();
    await statusLine().filter({ hasText: "Select messages first." }).waitFor(LONG);
    const header = await box(page.locator("header"));
    const status = await box(statusLine());
    const main = await box(page.locator("main"));
    // In the flow between the header and the view: it pushes the view down, covering none of it.
    expect(status.y).toBeGreaterThanOrEqual(header.y + header.height - 1);
    expect(status.y + status.height).toBeLessThanOrEqual(main.y + 1);

    // "Replay all", cancelled in the confirm: the line no longer says what an earlier click did.
    cp.answer = false;
    const asked = cp.dialogs.length;
    await page.getByRole("button", { name: "Replay all", exact: true }).click();
    await expect.poll(() => cp.dialogs.length, LONG).toBe(asked + 1);
    expect(cp.dialogs.at(-1)).toBe("Replay all 2 dead letter(s) of jobs.run?");
    await expect.poll(() => statusLine().textContent(), LONG).toBe("");
    expect(await statusLine().isVisible()).toBe(false);
    cp.answer = true;
    const dead = await consoleApi(url, TOKEN).get<{ dead: number }>("/api/signals/jobs.run");
    expect(dead.dead).toBe(2);
  });

  it("keeps a refused Runs filter in its form with the error beside it, and does not ask again", async () => {
    await cp.open("#/runs", "Runs");
    await page.locator("main tbody tr", { hasText: "trial.wait" }).waitFor(LONG);
    // The page's clock from here on moves only when the test says: its 2 s refreshes are counted, not waited for.
    await page.clock.install();
    const asked: string[] = [];
    // Only requests with a Since: a refresh of the unfiltered list timed before the clock was
    // installed may still go out (a full parallel run counted one), and is not what is asserted.
    page.on("request", (r) => {
      const u = new URL(r.url());
      if (u.pathname === "/api/runs" && u.searchParams.has("since")) asked.push(u.search);
    });
    await page.getByLabel("Flow").fill("trial.wait");
    await page.getByLabel("Since (ISO)").fill("yesterday");
    await page.getByRole("button", { name: "Filter" }).click();
    const error = page.locator("#runs-error");
    await error.waitFor(LONG);
    expect(await error.textContent()).toMatch(/^These filters were refused: OKE1605: .*yesterday/);
    expect(await page.getByRole("alert").count()).toBe(1);
    // The form stays, with what was typed, above the error.
    expect(await page.locator("main h1").textContent()).toBe("Runs");
    expect(await page.getByLabel("Since (ISO)").inputValue()).toBe("yesterday");
    expect(await page.getByLabel("Flow").inputValue()).toBe("trial.wait");
    expect((await box(page.locator("form.filters"))).y).toBeLessThan((await box(error)).y);
    expect(await page.locator("#view-error").count()).toBe(0);
    expect(asked).toHaveLength(1);
    expect(asked[0]).toContain("since=yesterday");

    // Five refresh periods later: the refused request was not sent again.
    await page.clock.runFor(10_000);
    await page.evaluate(() => 0); // a round trip: any request the timers started has been seen
    expect(asked).toHaveLength(1);

    // Fixed in place: the runs come back, and so do the refreshes.
    await page.getByLabel("Since (ISO)").fill("2000-01-01T00:00:00Z");
    await page.getByRole("button", { name: "Filter" }).click();
    await page.locator("main tbody tr", { hasText: "trial.wait" }).waitFor(LONG);
    expect(await error.count()).toBe(0);
    await page.locator("main").focus(); // a focused filter holds the refresh
    const before = asked.length;
    await page.clock.runFor(2_500);
    await expect.poll(() => asked.length, LONG).toBeGreaterThan(before);
    expect(cp.pageErrors).toEqual([]);
  });
});
