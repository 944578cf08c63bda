// A long run's page in headless Chromium: the timeline's head and tail with a line for what is left out, and every entry on request.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { consoleApi, LONG, openConsolePage, type ConsolePage } from "../support/console-browser.ts";
import { createApp } from "../../src/app/app.ts";
import type { App } from "../../src/app/types.ts";
import { flow } from "../../src/index.ts";
import { createMemoryStore } from "../../src/store/memory/memory-store.ts";

const TOKEN = "browser-test-token-0123456789";
const STEPS = 230;
const batch = flow("batch.long", {
  durable: true,
  do: async (_: { n: number }, fx) => {
    for (let i = 0; i < STEPS; i++) await fx.step(`s${i}`, () => i);
    return "done";
  },
});

describe("a long run on the Console page", () => {
  let app: App;
  let url: string;
  let cp: ConsolePage;
  let runId: string;

  beforeAll(async () => {
    app = createApp({
      modules: [{ batch }],
      env: "test",
      store: createMemoryStore(),
      config: { console: { port: 0, tokens: { alice: TOKEN } } },
    });
    url = (await app.start({ port: 0, host: "127.0.0.1" })).console!.url;
    await app.invoke(batch, { n: 1 });
    runId = (await consoleApi(url, TOKEN).get<{ items: Array<{ id: string }> }>("/api/runs?flow=batch.long"))
      .items[0]!.id;
    cp = await openConsolePage(url, TOKEN);
  });
  afterAll(async () => {
    await cp?.close();
    await app?.stop({ timeoutMs: 2_000 });
  });

  it("shows the first 50 and last 100 entries with a line for the rest, and every entry after Show every entry", async () => {
    await cp.open(`#/run/${runId}`, `Run ${runId}`);
    const entries = cp.page.locator(".timeline li");
    const omitted = cp.page.locator("#timeline-omitted");
    await omitted.waitFor(LONG);
    expect(await entries.count()).toBe(151);
    expect((await omitted.textContent())!.replace(/\s+/g, " ")).toBe(
      `… ${STEPS - 150} entries left out (after seq 49, before seq ${STEPS - 100}) · Show every entry`,
    );
    // The entries either side of the line are the head's last and the tail's first.
    expect(await entries.nth(49).textContent()).toContain("step s49");
    expect(await entries.nth(51).textContent()).toContain(`step s${STEPS - 100}`);
    await omitted.getByRole("link", { name: `every journal entry of run ${runId}` }).click();
    await cp.page.locator(`main > [data-key="view #/run/${runId}?timeline=all"]`).waitFor(LONG);
    await expect.poll(() => entries.count(), LONG).toBe(STEPS);
    expect(await omitted.count()).toBe(0);
    expect(cp.pageErrors).toEqual([]);
    expect(cp.cspViolations).toEqual([]);
  });
});
