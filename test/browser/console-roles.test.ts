// The Console page in headless Chromium tells web instances from workers: each instance's role in the Instances view, the count per role on the overview.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Page } from "playwright-core";
import { LONG, openConsolePage, type ConsolePage } from "../support/console-browser.ts";
import { until } from "../conformance/app-fixture.ts";
import { createApp } from "../../src/app/app.ts";
import type { App } from "../../src/app/types.ts";
import { createTimeTravel } from "../../src/clock/time-travel.ts";
import { flow, signal, on } from "../../src/index.ts";
import { createMemoryStore } from "../../src/store/memory/memory-store.ts";
import type { Store } from "../../src/store/types.ts";

const TOKEN = "browser-roles-token-0123456789";

const jobs = signal.once<{ n: number }>("roles.jobs");
const work = on(jobs, flow("roles.work", { do: () => undefined }));

describe("instance roles on the Console page", () => {
  // Time stands still: no heartbeat grows old while the test runs, however slow the machine.
  const time = createTimeTravel(1_700_000_000_000);
  let store: Store;
  const apps: App[] = [];
  let cp: ConsolePage;
  let page: Page;

  beforeAll(async () => {
    store = createMemoryStore();
    const web = createApp({
      modules: [{ jobs, work }],
      env: "test",
      clock: time,
      store,
      role: "web",
      config: { console: { port: 0, tokens: { alice: TOKEN } } },
    });
    apps.push(web);
    const url = (await web.start({ port: 0, host: "127.0.0.1" })).console!.url;
    const worker = createApp({ modules: [{ jobs, work }], env: "test", clock: time, store, role: "worker" });
    apps.push(worker);
    await worker.start({ port: 0, host: "127.0.0.1" });
    // An instance of an okengine before roles: its heartbeat has no role.
    await store.heartbeat(
      {
        id: "old-instance",
        version: "1.0.0",
        okengineVersion: "0.9.0",
        host: "old-host",
        pid: 1,
        env: "test",
        startedAt: time.now(),
        flows: ["roles.work"],
        signals: ["roles.jobs"],
        console: null,
      },
      time.now(),
    );
    await until(async () => (await store.listInstances(0)).length === 3, "three heartbeats");
    cp = await openConsolePage(url, TOKEN);
    page = cp.page;
  });
  afterAll(async () => {
    await cp?.close();
    while (apps.length > 0) await apps.pop()!.stop({ timeoutMs: 2_000 });
    await store?.close();
  });

  it("shows each instance's role, an older one's as all, and the count per role on the overview", async () => {
    const alive = page.locator("#instances-alive");
    await alive.waitFor(LONG);
    expect(await alive.textContent()).toBe("3 instance(s) alive (1 web, 1 worker, 1 all) · env test");

    await cp.open("#/instances", "Instances");
    const roleOf = (row: ReturnType<Page["locator"]>) => row.locator("td.role").textContent();
    await page.locator("main tbody tr").nth(2).waitFor(LONG);
    expect(await roleOf(page.getByRole("row", { name: /this one/ }))).toBe("web");
    expect(await roleOf(page.locator('main tr[data-key="old-instance"]'))).toBe("all");
    const roles = await page.locator("main td.role").allTextContents();
    expect([...roles].sort()).toEqual(["all", "web", "worker"]);
    expect(await page.getByRole("columnheader", { name: "Role" }).count()).toBe(1);
    expect(cp.pageErrors).toEqual([]);
    expect(cp.cspViolations).toEqual([]);
  });
});
