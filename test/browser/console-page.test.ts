// The Console page in headless Chromium: refreshes keep focus and clicks, actions report and refresh, no CSP violations, 390 px.
import { hostname } from "node:os";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Page } from "playwright-core";
import { consoleApi, LONG, openConsolePage, type ConsolePage } from "../support/console-browser.ts";
import { createApp } from "../../src/app/app.ts";
import type { App } from "../../src/app/types.ts";
import { flow, on, signal } from "../../src/index.ts";
import { createMemoryStore } from "../../src/store/memory/memory-store.ts";

const TOKEN = "browser-page-token-0123456789";
const SHOTS = process.env.OKE_CONSOLE_SCREENSHOTS; // a directory: write screenshots of the views there

// Browser globals in page.evaluate callbacks, typed just enough: the project compiles without the DOM lib.
interface DomElement {
  marked?: boolean;
  getAttribute(name: string): string | null;
  getBoundingClientRect(): { width: number };
}
declare const document: {
  activeElement: DomElement | null;
  documentElement: { scrollWidth: number };
  querySelector(selector: string): DomElement | null;
  querySelectorAll(selector: string): ArrayLike<DomElement> & Iterable<DomElement>;
};

// The few fields of the API's answers these tests read.
type Runs = { items: Array<{ id: string }> };
type TimelineItem = { kind: string; name: string; messageId?: string };
type AuditItem = { action: string; detail: Record<string, unknown> };

let fixed = false;
const jobs = signal.once<{ n: number; fail?: boolean }>("jobs.run", { retries: 0 });
const runJobs = on(
  jobs,
  flow("jobs.work", {
    do: ({ n, fail }: { n: number; fail?: boolean }) => {
      if (fail && !fixed) throw Object.assign(new Error(`job ${n} failed`), { code: "E_JOB" });
    },
  }),
);
const bulk = signal.once<{ n: number }>("bulk.clean", { retries: 0 });
const runBulk = on(
  bulk,
  flow("bulk.work", {
    do: ({ n }: { n: number }) => {
      throw new Error(`bulk ${n} failed`);
    },
  }),
);
const done = signal.once<{ n: number }>("jobs.done", { retries: 0 });
const runDone = on(done, flow("jobs.done.log", { do: () => undefined }));
const announced = signal.broadcast<{ n: number }>("jobs.announced");
const hear = on(announced, flow("jobs.hear", { do: () => undefined }));
const child = flow("report.child", {
  durable: true,
  do: async (_: { n: number }, fx) => fx.step("render", () => "ok"),
});
const parent = flow("report.parent", {
  durable: true,
  do: async ({ n }: { n: number }, fx) => {
    await fx.call(child, { n });
    await fx.emit(done, { n });
    await fx.emit(announced, { n });
    await fx.emit(jobs, { n: 100 + n, fail: true }); // a dead letter the first test discards
    return "sent";
  },
});
const waiting = flow("trial.wait", {
  durable: true,
  do: async (_: { user: string }, fx) => {
    await fx.clock.sleep("trial-expiry", "7d");
  },
});

describe("the Console page in headless Chromium", () => {
  let app: App;
  let url: string;
  let cp: ConsolePage;
  let page: Page;

  const apiGet = <T>(path: string): Promise<T> => consoleApi(url, TOKEN).get<T>(path);
  const apiPost = (path: string, body: unknown): Promise<Response> => consoleApi(url, TOKEN).post(path, body);
  const open = (hash: string, heading: string | RegExp) => cp.open(hash, heading);
  const shot = async (name: string) => {
    if (SHOTS) await page.screenshot({ path: `${SHOTS}/${name}.png`, fullPage: true });
  };
  const statusLine = () => page.locator("#status");
  // A signal's counts line: "pending 0 · in flight 0 · dead 3 · …" and its sparkline.
  const counts = () => page.locator("main p", { hasText: /^pending \d+ · in flight/ });
  const deadCount = async () => Number(/dead (\d+)/.exec((await counts().textContent())!)![1]);

  beforeAll(async () => {
    app = createApp({
      modules: [{ jobs, runJobs, bulk, runBulk, done, runDone, announced, hear, child, parent, waiting }],
      env: "test",
      store: createMemoryStore(),
      config: { console: { port: 0, tokens: { alice: TOKEN } } },
    });
    const started = await app.start({ port: 0, host: "127.0.0.1" });
    url = started.console!.url;
    await app.emit(jobs, { n: 0 }); // delivered: the sparkline has one busy minute among quiet ones
    for (let n = 1; n <= 3; n++) await app.emit(jobs, { n, fail: true }, { id: `m_job_${n}` });
    for (let n = 1; n <= 4; n++) await app.emit(bulk, { n });
    await app.invoke(parent, { n: 1 });
    await app.invoke(waiting, { user: "ada" });
    await app.invoke(waiting, { user: "bob" });
    await app.idle();

    cp = await openConsolePage(url, TOKEN);
    page = cp.page;
  });
  afterAll(async () => {
    await cp?.close();
    await app?.stop({ timeoutMs: 2_000 });
  });

  it("shows the trace chain as links; links an emit only to a once message the store still holds", async () => {
    const p = (await apiGet<Runs>("/api/runs?flow=report.parent")).items[0]!;
    const c = (await apiGet<Runs>("/api/runs?flow=report.child")).items[0]!;
    const { timeline } = await apiGet<{ timeline: TimelineItem[] }>(`/api/runs/${p.id}`);
    const discarded = timeline.find((e) => e.kind === "emit" && e.name === "jobs.run")!.messageId;
    expect((await apiPost("/api/signals/jobs.run/discard", { ids: [discarded] })).status).toBe(200);
    await open(`#/run/${p.id}`, `Run ${p.id}`);
    const children = page.locator("#trace-children a");
    expect(await children.count()).toBe(1);
    expect(await children.getAttribute("href")).toBe(`#/run/${c.id}`);
    expect((await page.locator("#trace-children").textContent())!.replace(/\s+/g, " ")).toBe(
      `Children: ${c.id} (report.child, completed)`,
    );
    const emit = (signalName: string) => page.locator(".timeline li", { hasText: `emit ${signalName} ` });
    expect(await emit("jobs.done").locator("a").getAttribute("href")).toMatch(/^#\/message\//);
    expect(await emit("jobs.done").textContent()).toContain("(delivered)");
    // A broadcast has no message to open; a discarded message is gone: neither is a link.
    expect(await emit("jobs.announced").locator("a").count()).toBe(0);
    expect(await emit("jobs.announced").textContent()).toContain("(broadcast)");
    expect(await emit("jobs.announced").textContent()).not.toMatch(/pruned|gone/);
    expect(await emit("jobs.run").locator("a").count()).toBe(0);
    expect(await emit("jobs.run").textContent()).toContain(`${discarded} (gone`);
    await shot("page-run-1200");
    await children.click();
    await page.locator("main h1", { hasText: `Run ${c.id}` }).waitFor(LONG);
    expect(await page.locator("#trace-parent a").getAttribute("href")).toBe(`#/run/${p.id}`);
  });

  it("keeps keyboard focus on a link across refreshes that insert rows above it, and Tab goes on from there", async () => {
    await open("#/", "Overview");
    const focused = page.getByRole("link", { name: "message m_job_2" });
    await focused.focus();
    await focused.evaluate((el) => void ((el as DomElement).marked = true));
    for (const n of [4, 5]) {
      // A new dead letter: the refresh puts its row at the top of Recent failures, above the focused link.
      await app.emit(jobs, { n, fail: true }, { id: `m_job_${n}` });
      await app.idle();
      await page.getByRole("link", { name: `message m_job_${n}` }).waitFor(LONG);
      expect(await page.evaluate(() => document.activeElement?.marked === true)).toBe(true);
    }
    const expected = await page.evaluate(() => {
      const all = [...document.querySelectorAll("a[href], button:not([hidden]), input, select")];
      return all[all.indexOf(document.activeElement!) + 1]!.getAttribute("href");
    });
    await page.keyboard.press("Tab");
    expect(await page.evaluate(() => document.activeElement!.getAttribute("href"))).toBe(expected);
  });

  it("follows a click made while a refresh is in flight, and drops the refresh's late answer", async () => {
    await open("#/", "Overview");
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let arrived!: () => void;
    const refreshing = new Promise<void>((r) => (arrived = r));
    await page.route("**/api/overview", async (route) => {
      arrived();
      await held;
      await route.continue();
    });
    await refreshing; // the next poll is now waiting on the server
    await page.getByRole("navigation", { name: "Views" }).getByRole("link", { name: "Runs" }).click();
    await page.locator("main h1", { hasText: "Runs" }).waitFor(LONG);
    const lateAnswer = page.waitForResponse((r) => r.url().includes("/api/overview"), LONG);
    release();
    await lateAnswer;
    await page.unroute("**/api/overview");
    await page.waitForResponse((r) => r.url().includes("/api/runs"), LONG); // a later refresh of Runs
    expect(await page.locator("main h1").textContent()).toBe("Runs");
  });

  it("after Replay selected clears the boxes and keeps refreshing: the dead count drops", async () => {
    fixed = true;
    await open("#/signal/jobs.run", "Signal jobs.run");
    const before = await deadCount();
    expect(before).toBeGreaterThanOrEqual(2);
    const boxes = page.locator("input[name=pick]");
    await boxes.nth(0).check();
    await boxes.nth(1).check();
    cp.answer = true;
    await page.getByRole("button", { name: "Replay selected" }).click();
    await statusLine().filter({ hasText: "Replayed 2 message(s)" }).waitFor(LONG);
    expect(cp.dialogs.at(-1)).toBe("Replay 2 dead letter(s) of jobs.run?");
    await counts()
      .filter({ hasText: `dead ${before - 2} ` })
      .waitFor(LONG);
    expect(await page.locator("input[name=pick]:checked").count()).toBe(0);
    expect(await page.locator("input[name=pick]").count()).toBe(before - 2);
  });

  it("discards all dead letters after confirming with the dry-run count; cancelling discards nothing", async () => {
    await open("#/signal/bulk.clean", "Signal bulk.clean");
    expect(await deadCount()).toBe(4);
    cp.answer = false;
    const asked = cp.dialogs.length;
    await page.getByRole("button", { name: "Discard all" }).click(LONG);
    await expect.poll(() => cp.dialogs.length, LONG).toBe(asked + 1);
    expect(cp.dialogs.at(-1)).toMatch(/^Discard all 4 dead letter\(s\) of bulk\.clean\?/);
    expect((await apiGet<{ dead: number }>("/api/signals/bulk.clean")).dead).toBe(4);
    cp.answer = true;
    await page.getByRole("button", { name: "Discard all" }).click();
    await statusLine().filter({ hasText: "Discarded 4 message(s) of bulk.clean." }).waitFor(LONG);
    await counts().filter({ hasText: "dead 0 " }).waitFor(LONG);
    await page.getByRole("cell", { name: "Nothing here." }).waitFor(LONG);
    expect((await apiGet<{ dead: number }>("/api/signals/bulk.clean")).dead).toBe(0);
    const audit = (await apiGet<{ items: AuditItem[] }>("/api/audit?limit=5")).items;
    expect(audit.some((a) => a.action === "discard" && a.detail.all === true && !a.detail.dryRun)).toBe(true);
  });

  it("draws the sparkline and spaces the status links with classes: bars of different heights, zero CSP violations", async () => {
    await open("#/signal/jobs.run", "Signal jobs.run");
    const heights = await counts()
      .locator(".bar span")
      .evaluateAll((bars) => bars.map((b) => b.getBoundingClientRect().height));
    expect(heights).toHaveLength(10);
    expect(new Set(heights).size).toBeGreaterThan(1);
    expect(Math.max(...heights)).toBeGreaterThanOrEqual(10);
    const tabs = await page
      .getByRole("navigation", { name: "Message status" })
      .getByRole("link")
      .evaluateAll((links) => links.map((a) => a.getBoundingClientRect()));
    for (let i = 1; i < tabs.length; i++)
      expect(tabs[i]!.left - tabs[i - 1]!.right).toBeGreaterThanOrEqual(8);
    await open("#/", "Overview");
    await page.locator(".bar span.b8").first().waitFor(LONG);
    expect(cp.cspViolations).toEqual([]);
  });

  it("reports a failed action with the API's code and message, shows a failed view as an error, and clears both on success", async () => {
    const sleeping = (await apiGet<Runs>("/api/runs?flow=trial.wait&status=sleeping")).items;
    const run = sleeping[0]!;
    await open(`#/run/${run.id}`, `Run ${run.id}`);
    // The run wakes elsewhere just before the page's own request reaches the server: a real 404.
    await page.route("**/api/runs/*/wake", async (route) => {
      expect((await apiPost(`/api/runs/${run.id}/wake`, {})).status).toBe(200);
      await route.continue();
    });
    cp.answer = true;
    await page.getByRole("button", { name: "Wake now" }).click();
    const failed = statusLine().filter({ hasText: "Wake failed" });
    await failed.waitFor(LONG);
    // The spec's message, then the fix saying the run is there but no longer asleep.
    expect(await failed.textContent()).toBe(
      `Wake failed: ClockResourceNotFoundError: run "${run.id}" not found ("Not found" means no sleeping run "${run.id}": it exists but is completed, and only a sleeping run can be woken (oke run ${run.id} shows where it is).)`,
    );
    expect(await failed.getAttribute("class")).toBe("bad");
    await page.unroute("**/api/runs/*/wake");
    await page.locator("#run-status", { hasText: "completed" }).waitFor(LONG); // the view was re-read

    // On the other sleeping run: a wake that fails (sent to a run that does not exist), then one that
    // succeeds: the success replaces the error, without leaving the page.
    const other = sleeping[1]!;
    await open(`#/run/${other.id}`, `Run ${other.id}`);
    expect(await failed.count()).toBe(0); // a new page: the old error is gone
    await page.route("**/api/runs/*/wake", (route) =>
      route.continue({ url: `${url}/api/runs/r_missing/wake` }),
    );
    await page.getByRole("button", { name: "Wake now" }).click();
    await statusLine()
      .filter({ hasText: 'Wake failed: ClockResourceNotFoundError: run "r_missing" not found' })
      .waitFor(LONG);
    await page.unroute("**/api/runs/*/wake");
    await page.getByRole("button", { name: "Wake now" }).click();
    await statusLine().filter({ hasText: "Woken" }).waitFor(LONG);
    expect(await statusLine().getAttribute("class")).toBe("");
    await page.locator("#run-status", { hasText: "completed" }).waitFor(LONG);

    // A view that cannot be read shows why, in place of the page that was there.
    await page.goto(`${url}/#/message/m_missing`);
    await page.locator("main h1", { hasText: "Could not show this view" }).waitFor(LONG);
    expect(await page.locator("#view-error").textContent()).toMatch(/^OKE\d+: .*no message "m_missing"/);
    expect(await page.locator("main").textContent()).not.toContain(other.id);
    await shot("page-error-view-1200");
    await page.getByRole("link", { name: "back to the overview" }).click();
    await page.locator("main h1", { hasText: "Overview" }).waitFor(LONG);
    expect(await page.locator("#view-error").count()).toBe(0);
    expect(cp.pageErrors).toEqual([]);
  });

  it("shows the audit log on the overview, pages the audit view, and instances with host and pid", async () => {
    for (let i = 0; i < 55; i++)
      expect((await apiPost("/api/signals/jobs.run/replay", { all: true, dryRun: true })).status).toBe(200);
    await open("#/", "Overview");
    await page.getByRole("heading", { name: "Audit log" }).waitFor(LONG);
    expect(await page.getByRole("cell", { name: "alice" }).count()).toBeGreaterThan(0);
    await page.getByRole("link", { name: "the whole audit log" }).click();
    await page.locator("main h1", { hasText: "Audit log" }).waitFor(LONG);
    expect(await page.locator("main tbody tr").count()).toBe(50);
    const firstPage = await page.locator("main tbody tr").first().getAttribute("data-key");
    await page.getByRole("link", { name: "next page" }).click();
    await page.getByRole("link", { name: "newest entries" }).waitFor(LONG);
    expect(page.url()).toContain("#/audit?cursor=");
    const rows = page.locator("main tbody tr");
    expect(await rows.count()).toBeGreaterThan(0);
    expect(await rows.first().getAttribute("data-key")).not.toBe(firstPage);

    await open("#/instances", "Instances");
    const self = page.getByRole("row", { name: /this one/ });
    expect(await self.locator("td.host").textContent()).toBe(hostname());
    expect(await self.locator("td.pid").textContent()).toBe(String(process.pid));
  });

  it("fits 390 px: no page wider than the viewport, the header spans it", async () => {
    const r = (await apiGet<Runs>("/api/runs?flow=report.parent")).items[0]!;
    await page.setViewportSize({ width: 390, height: 844 });
    for (const [hash, heading, name] of [
      ["#/", "Overview", "overview"],
      ["#/runs", "Runs", "runs"],
      ["#/signal/jobs.run", "Signal jobs.run", "signal"],
      [`#/run/${r.id}`, `Run ${r.id}`, "run"],
      ["#/audit", "Audit log", "audit"],
      ["#/instances", "Instances", "instances"],
    ] as const) {
      await open(hash, heading);
      const { scrollWidth, header } = await page.evaluate(() => ({
        scrollWidth: document.documentElement.scrollWidth,
        header: document.querySelector("header")!.getBoundingClientRect().width,
      }));
      expect(scrollWidth, name).toBeLessThanOrEqual(390);
      expect(header).toBe(390);
      await shot(`page-${name}-390`);
    }
    await page.setViewportSize({ width: 1200, height: 800 });
  });

  it("signs out: back to the sign-in view, header cleared, the session gone", async () => {
    await open("#/", "Overview");
    await page.locator("#who", { hasText: "alice · test" }).waitFor(LONG);
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.getByRole("heading", { name: "Sign in" }).waitFor(LONG);
    expect(await page.locator("#who").textContent()).toBe("");
    expect(await page.getByRole("button", { name: "Sign out" }).count()).toBe(0);
    expect((await page.request.get(`${url}/api/whoami`)).status()).toBe(401);
    await page.getByLabel("Operator token").fill(TOKEN);
    await page.keyboard.press("Enter");
    await page.getByRole("heading", { name: "Overview" }).waitFor(LONG);
    await page.locator("#who", { hasText: "alice · test" }).waitFor(LONG);
    expect(cp.cspViolations).toEqual([]);
    expect(cp.pageErrors).toEqual([]);
  });
});
