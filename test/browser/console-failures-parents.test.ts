// The Console page in headless Chromium: Recent failures merges dead letters and failed runs newest first, and a run whose parent is no stored run names it as text.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Page } from "playwright-core";
import { consoleApi, openConsolePage, type ConsolePage } from "../support/console-browser.ts";
import { until } from "../conformance/app-fixture.ts";
import { createApp } from "../../src/app/app.ts";
import type { App } from "../../src/app/types.ts";
import { createTimeTravel } from "../../src/clock/time-travel.ts";
import { flow, on, signal } from "../../src/index.ts";
import { createMemoryStore } from "../../src/store/memory/memory-store.ts";
import type { Store } from "../../src/store/types.ts";

const TOKEN = "browser-failures-token-0123456789";
/** 2023-11-14 22:13:20 UTC. Time stands still unless the test moves it. */
const T0 = 1_700_000_000_000;

// Every message on it ends a dead letter at its first attempt.
const mail = signal.once<{ n: number }>("mail.send", { retries: 0 });
const mailer = on(
  mail,
  flow("mail.deliver", {
    do: ({ n }: { n: number }) => {
      throw new Error(`mail ${n} bounced`);
    },
  }),
);
const broken = flow("trips.broken", {
  durable: true,
  do: async (_: { n: number }, fx) => {
    await fx.step("try", () => 1);
    throw new Error("trip broke");
  },
});
// A plain flow (an HTTP request's, say) emits to a durable consumer: the consumer's run has a parent
// no run is stored for.
const relay = signal.once<{ n: number }>("jobs.relay");
const relayWorker = on(
  relay,
  flow("jobs.relayWork", {
    durable: true,
    do: async ({ n }: { n: number }, fx) => fx.step("relay", () => n),
  }),
);
const plainRelay = flow("trips.plainRelay", {
  do: async ({ n }: { n: number }, fx) => {
    await fx.emit(relay, { n });
  },
});

describe("the Console page: recent failures in time order, parents that are no stored run", () => {
  const time = createTimeTravel(T0);
  let store: Store;
  let app: App;
  let url: string;
  let cp: ConsolePage;
  let page: Page;

  const apiGet = <T>(path: string): Promise<T> => consoleApi(url, TOKEN).get<T>(path);

  beforeAll(async () => {
    store = createMemoryStore();
    app = createApp({
      modules: [{ mailer, broken, relayWorker, plainRelay }],
      env: "test",
      clock: time,
      store,
      config: { console: { port: 0, tokens: { alice: TOKEN } } },
    });
    url = (await app.start({ port: 0, host: "127.0.0.1" })).console!.url;
    cp = await openConsolePage(url, TOKEN);
    page = cp.page;
  });
  afterAll(async () => {
    await cp?.close();
    await app?.stop({ timeoutMs: 2_000 });
    await store?.close();
  });

  it("Recent failures lists dead letters and failed runs as one list, newest first", async () => {
    // A dead letter at +1 s, a failed run at +2 s, a dead letter at +3 s.
    time.advance(1_000);
    await app.emit(mail, { n: 1 }, { id: "m_mail_1" });
    await app.idle();
    time.advance(1_000);
    await app.invoke(broken, { n: 2 }).catch(() => undefined);
    await app.idle();
    time.advance(1_000);
    await app.emit(mail, { n: 3 }, { id: "m_mail_3" });
    await app.idle();
    const runId = (await store.listRuns({ flow: "trips.broken" }))[0]!.id;

    await cp.open("#/", "Overview");
    const rows = page.locator("main h2:text-is('Recent failures') + div.scroll tbody tr");
    await until(async () => (await rows.count()) === 3, "three recent failures", 15_000);
    expect(await rows.evaluateAll((trs) => trs.map((tr) => tr.getAttribute("data-key")))).toEqual([
      "dead m_mail_3",
      `run ${runId}`,
      "dead m_mail_1",
    ]);
    expect(await rows.locator("td.time").allTextContents()).toEqual([
      "2023-11-14 22:13:23",
      "2023-11-14 22:13:22",
      "2023-11-14 22:13:21",
    ]);
    expect(cp.pageErrors).toEqual([]);
    expect(cp.cspViolations).toEqual([]);
  });

  it("a run whose parent is a flow invocation names it as text, with why there is no timeline: no dead link, not 'No parent.'", async () => {
    await app.invoke(plainRelay, { n: 1 });
    await app.idle();
    type Runs = { items: Array<{ id: string; parentRunId: string | null }> };
    const consumer = (await apiGet<Runs>("/api/runs?flow=jobs.relayWork")).items[0]!;
    expect(consumer.parentRunId).toEqual(expect.any(String));

    await cp.open(`#/run/${consumer.id}`, `Run ${consumer.id}`);
    const parent = page.locator("#trace-parent");
    expect((await parent.textContent())!.replace(/\s+/g, " ")).toBe(
      `Parent: flow invocation ${consumer.parentRunId} (no run stored: not durable, or pruned — no timeline)`,
    );
    expect(await parent.locator("a").count()).toBe(0);
    expect(await page.locator("#parent-unstored").textContent()).toBe(consumer.parentRunId);

    // A run with no parent at all still says so.
    const failed = (await apiGet<Runs>("/api/runs?flow=trips.broken")).items[0]!;
    await cp.open(`#/run/${failed.id}`, `Run ${failed.id}`);
    expect(await page.locator("#trace-parent").textContent()).toBe("No parent.");
    expect(cp.pageErrors).toEqual([]);
    expect(cp.cspViolations).toEqual([]);
  });
});
