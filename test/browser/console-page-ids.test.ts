// The Console page in headless Chromium over ids and times: "emitted by" links only a stored run, audit details read as text, an address without an id says so.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Page } from "playwright-core";
import { consoleApi, LONG, openConsolePage, type ConsolePage } from "../support/console-browser.ts";
import { createApp } from "../../src/app/app.ts";
import type { App } from "../../src/app/types.ts";
import { flow, http, on, signal } from "../../src/index.ts";
import { createMemoryStore } from "../../src/store/memory/memory-store.ts";

const TOKEN = "browser-ids-token-0123456789";
// Epoch milliseconds as they would leak onto the page: 13 digits from 2001 on.
const RAW_EPOCH = /\b1\d{12}\b/;
/** A time as the page shows times (console.js `time`). */
const shown = (ms: number) => new Date(ms).toISOString().replace("T", " ").slice(0, 19);

type Message = { id: string; parentRunId: string | null; payload: { n: number } };
type AuditItem = { action: string; detail: Record<string, unknown> };

// A once signal whose consumer always fails: every message on it ends a dead letter, with its emitter.
const orders = signal.once<{ n: number }>("orders.audit", { retries: 0 });
const check = on(
  orders,
  flow("orders.check", {
    do: ({ n }: { n: number }) => {
      throw new Error(`order ${n} refused`);
    },
  }),
);
// The defect's setting: a plain (not durable) HTTP flow emits; its invocation id is no stored run.
const web = on(
  http.post("/orders"),
  flow("orders.web", {
    do: async ({ n }: { n: number }, fx) => {
      await fx.emit(orders, { n });
      return "queued";
    },
  }),
);
const durable = flow("orders.durable", {
  durable: true,
  do: async ({ n }: { n: number }, fx) => {
    await fx.emit(orders, { n });
  },
});
const napper = flow("orders.nap", {
  durable: true,
  do: async (_: { n: number }, fx) => {
    await fx.clock.sleep("nap", "1h");
  },
});

describe("the Console page: ids, emitters and times", () => {
  let app: App;
  let url: string;
  let cp: ConsolePage;
  let page: Page;
  let plain: Message;
  let fromRun: Message;
  let wakeAt: number;

  const apiGet = <T>(path: string): Promise<T> => consoleApi(url, TOKEN).get<T>(path);
  const apiPost = async (path: string, body: unknown): Promise<unknown> => {
    const res = await consoleApi(url, TOKEN).post(path, body);
    expect(res.status).toBe(200);
    return res.json();
  };
  const open = (hash: string, heading: string | RegExp) => cp.open(hash, heading);
  const mainText = async () => (await page.locator("main").textContent())!.replace(/\s+/g, " ");

  const store = createMemoryStore();

  beforeAll(async () => {
    app = createApp({
      modules: [{ orders, check, web, durable, napper }],
      env: "test",
      store,
      config: { console: { port: 0, tokens: { alice: TOKEN } } },
    });
    const started = await app.start({ port: 0, host: "127.0.0.1" });
    url = started.console!.url;
    const posted = await fetch(`http://127.0.0.1:${started.port}/orders`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ n: 1 }),
    });
    expect(posted.status).toBe(200);
    await app.invoke(durable, { n: 2 });
    await app.invoke(napper, { n: 3 });
    await app.idle();

    const dead = (await apiGet<{ items: Message[] }>("/api/signals/orders.audit/dead")).items;
    plain = dead.find((m) => m.payload.n === 1)!;
    fromRun = dead.find((m) => m.payload.n === 2)!;
    expect(plain.parentRunId).toEqual(expect.any(String));
    expect(fromRun.parentRunId).toEqual(expect.any(String));
    // Audit entries with a time in them (a wake's wakeAt) and an empty list (a replay of nothing).
    const sleeping = (await apiGet<{ items: Array<{ id: string }> }>("/api/runs?flow=orders.nap")).items[0]!;
    await apiPost(`/api/runs/${sleeping.id}/wake`, {});
    await apiPost("/api/signals/orders.audit/replay", { ids: ["m_not_dead"] });
    const audit = (await apiGet<{ items: AuditItem[] }>("/api/audit")).items;
    wakeAt = audit.find((a) => a.action === "wake")!.detail.wakeAt as number;
    expect(wakeAt).toEqual(expect.any(Number));
    expect(audit.find((a) => a.action === "replay")!.detail.ids).toEqual([]);

    cp = await openConsolePage(url, TOKEN);
    page = cp.page;
  });
  afterAll(async () => {
    await cp?.close();
    await app?.stop({ timeoutMs: 2_000 });
  });

  it("names a plain flow's invocation as text, not as a link to a run view that cannot open", async () => {
    await open(`#/message/${plain.id}`, `Message ${plain.id}`);
    const line = page.locator("main p", { hasText: "emitted by" });
    expect((await line.textContent())!.replace(/\s+/g, " ")).toContain(
      `emitted by flow invocation ${plain.parentRunId} (no run stored: not durable, or pruned — no timeline)`,
    );
    expect(await line.locator('a[href^="#/run/"]').count()).toBe(0);
    expect(await page.locator("#emitted-by").textContent()).toBe(plain.parentRunId);
  });

  it("links a durable run's emit to that run, and the link opens it", async () => {
    await open(`#/message/${fromRun.id}`, `Message ${fromRun.id}`);
    const line = page.locator("main p", { hasText: "emitted by" });
    expect((await line.textContent())!.replace(/\s+/g, " ")).toContain(
      `emitted by run ${fromRun.parentRunId}`,
    );
    expect(await page.locator("#emitted-by").count()).toBe(0);
    await line.getByRole("link", { name: `run ${fromRun.parentRunId}` }).click();
    await page.locator("main h1", { hasText: `Run ${fromRun.parentRunId}` }).waitFor(LONG);
    expect(await page.locator("#view-error").count()).toBe(0);
  });

  it("shows an audit entry's times as the page shows times, and leaves out an empty list", async () => {
    for (const [hash, heading] of [
      ["#/audit", "Audit log"],
      ["#/", "Overview"],
    ] as const) {
      await open(hash, heading);
      const wake = page.locator("main tbody tr", { hasText: "wake" }).locator("td.detail");
      expect(await wake.textContent()).toContain(`wakeAt ${shown(wakeAt)}`);
      expect(await wake.textContent()).not.toMatch(RAW_EPOCH);
      const replay = page.locator("main tbody tr", { hasText: "replay" }).locator("td.detail");
      expect(await replay.textContent()).toBe("all false · count 0");
    }
  });

  it("names a broadcast copy's queue on its message, not as a link to a signal view that cannot open", async () => {
    await store.enqueue(
      [
        {
          id: "copy-1",
          signal: "~broadcast:news.sent:news.reader",
          key: null,
          payload: {},
          parentRunId: null,
        },
      ],
      Date.now(),
    );
    await open("#/message/copy-1", "Message copy-1");
    expect(await page.locator("#message-queue").textContent()).toBe(
      "~broadcast:news.sent:news.reader (a broadcast copy queue)",
    );
    expect(await page.locator('main a[href^="#/signal/"]').count()).toBe(0);
    expect(cp.pageErrors).toEqual([]);
  });

  it("says which id an address lacks (#/run/, #/message/, #/signal/), never undefined", async () => {
    for (const [hash, said] of [
      ["#/run/", 'no run id given in the address "#/run/"'],
      ["#/run", 'no run id given in the address "#/run"'],
      ["#/message/", 'no message id given in the address "#/message/"'],
      ["#/signal/", 'no signal name given in the address "#/signal/"'],
      ["#/signal/?status=dead", 'no signal name given in the address "#/signal/?status=dead"'],
      [
        "#/run/%E0%A4%A",
        `the address "#/run/%E0%A4%A" is not a view's address (a % escape that does not decode)`,
      ],
    ] as const) {
      await page.goto(`${url}/${hash}`);
      await page.locator("#view-error", { hasText: said }).waitFor(LONG);
      expect(await page.locator("main h1").textContent()).toBe("Could not show this view");
      expect(await mainText()).not.toContain("undefined");
    }
    await page.goto(`${url}/#/run/`);
    await page.locator("main p", { hasText: "Open a run from the Runs view" }).waitFor(LONG);
  });

  it("shows no view with the word undefined or raw epoch milliseconds in it", async () => {
    const runs = (await apiGet<{ items: Array<{ id: string }> }>("/api/runs")).items;
    expect(runs.length).toBeGreaterThanOrEqual(2);
    const views: Array<[string, string]> = [
      ["#/", "Overview"],
      ["#/runs", "Runs"],
      ...runs.map((r): [string, string] => [`#/run/${r.id}`, `Run ${r.id}`]),
      ["#/signal/orders.audit", "Signal orders.audit"],
      ["#/signal/orders.audit?status=delivered", "Signal orders.audit"],
      [`#/message/${plain.id}`, `Message ${plain.id}`],
      [`#/message/${fromRun.id}`, `Message ${fromRun.id}`],
      ["#/schedules", "Schedules"],
      ["#/instances", "Instances"],
      ["#/audit", "Audit log"],
    ];
    for (const [hash, heading] of views) {
      await open(hash, heading);
      const text = await mainText();
      expect(text, hash).not.toContain("undefined");
      expect(text, hash).not.toMatch(RAW_EPOCH);
    }
    expect(cp.pageErrors).toEqual([]);
  });
});
