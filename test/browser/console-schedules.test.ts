// The Console's Schedules view in headless Chromium: what `oke schedules` shows (fires to the millisecond, lag, missed runs, orphaned, last error), and pause, resume, trigger, edit and reset, each confirmed and reported.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { consoleApi, LONG, openConsolePage, type ConsolePage } from "../support/console-browser.ts";
import { until } from "../conformance/app-fixture.ts";
import { createApp } from "../../src/app/app.ts";
import type { App } from "../../src/app/types.ts";
import { createTimeTravel } from "../../src/clock/time-travel.ts";
import { clock, flow, on } from "../../src/index.ts";
import { createMemoryStore } from "../../src/store/memory/memory-store.ts";

const TOKEN = "browser-schedules-token-0123456789";
/** 2023-11-14 22:13:20 UTC, a whole second. Time stands still unless a test moves it. */
const T0 = 1_700_000_000_000;
const HOUR = 3_600_000;

// Every 750 ms: its slots fall between whole seconds (…:19.500, …:20.250).
const fast = on(clock("ticks.fast", { every: "750ms" }), flow("ticks.fast", { do: () => undefined }));
// Every hour, and its flow always fails: the last fire's error is kept on the schedule.
const broken = on(
  clock("reports.broken", { every: "1h", retries: 0 }),
  flow("reports.broken", {
    do: () => {
      throw Object.assign(new Error("the report broke"), { code: "E_REPORT" });
    },
  }),
);
const nightly = on(
  clock("reports.nightly", { cron: "0 3 * * *", overridable: true }),
  flow("reports.nightly", { do: () => undefined }),
);
// Declared by the first deploy only: the second one's boot marks it orphaned.
const retired = on(
  clock("reports.retired", { every: "1d" }),
  flow("reports.retired", { do: () => undefined }),
);

interface View {
  name: string;
  paused: boolean;
  orphaned: boolean;
  overridden: boolean;
  nextFireAt: number | null;
  lastScheduledAt: number | null;
  lastFiredAt: number | null;
  lagMs: number | null;
  missedRuns: number;
  lastError: { code: string } | null;
}
type AuditItem = { action: string; target: string };
// The page's document in page.evaluate, typed just enough: the project compiles without the DOM lib.
declare const document: { documentElement: { scrollWidth: number } };

describe("the Console's Schedules view", () => {
  const time = createTimeTravel(T0 - 2 * HOUR);
  const store = createMemoryStore();
  let app: App;
  let url: string;
  let cp: ConsolePage;

  const apiGet = <T>(path: string): Promise<T> => consoleApi(url, TOKEN).get<T>(path);
  const schedule = async (name: string): Promise<View> =>
    (await apiGet<{ schedules: View[] }>("/api/schedules")).schedules.find((s) => s.name === name)!;
  const rowOf = (name: string) => cp.page.locator(`main tr[data-key="schedule ${name}"]`);
  const cell = (name: string, cls: string) => rowOf(name).locator(`td.${cls}`);
  const statusLine = () => cp.page.locator("#status");

  beforeAll(async () => {
    // The first deploy, two hours before T0, declares all four clocks; nothing fires while it runs.
    const first = createApp({
      modules: [{ fast, broken, nightly, retired }],
      env: "test",
      clock: time,
      store,
    });
    await first.start({ port: 0, host: "127.0.0.1" });
    await first.stop();
    // The second deploy boots at T0 without reports.retired: the due clocks fire their latest slot once.
    time.set(T0);
    app = createApp({
      modules: [{ fast, broken, nightly }],
      env: "test",
      clock: time,
      store,
      config: { console: { port: 0, tokens: { alice: TOKEN } } },
    });
    url = (await app.start({ port: 0, host: "127.0.0.1" })).console!.url;
    await until(async () => (await schedule("reports.broken")).lastError !== null, "the broken fire's error");
    await until(async () => (await schedule("ticks.fast")).lastFiredAt !== null, "the fast clock's catch-up");
    cp = await openConsolePage(url, TOKEN);
  });
  afterAll(async () => {
    await cp?.close();
    await app?.stop({ timeoutMs: 2_000 });
    await store.close();
  });

  it("shows each schedule as `oke schedules` does, and more: state, fire times to the ms, lag, missed runs, last error", async () => {
    const f = await schedule("ticks.fast");
    // The catch-up fire after two hours down: the latest slot, standing for the ones before it.
    expect(f).toMatchObject({ lastScheduledAt: T0 - 500, lastFiredAt: T0, lagMs: 500, nextFireAt: T0 + 250 });
    expect(f.missedRuns).toBeGreaterThan(9_000);
    await cp.open("#/schedules", "Schedules");
    await rowOf("ticks.fast").waitFor(LONG);
    expect(await cell("ticks.fast", "spec").textContent()).toBe("every 750ms");
    expect(await cell("ticks.fast", "state").textContent()).toBe("active");
    // Sub-second slots are never cut to the whole second; a whole-second time reads like the others.
    expect(await cell("ticks.fast", "next-fire").textContent()).toBe("2023-11-14 22:13:20.250");
    expect(await cell("ticks.fast", "last-slot").textContent()).toBe("2023-11-14 22:13:19.500");
    expect(await cell("ticks.fast", "last-fired").textContent()).toBe("2023-11-14 22:13:20");
    expect(await cell("ticks.fast", "lag").textContent()).toBe("500 ms");
    expect(await cell("ticks.fast", "missed").textContent()).toBe(String(f.missedRuns));
    expect(await cell("ticks.fast", "last-error").textContent()).toBe("—");

    expect(await cell("reports.broken", "last-error").textContent()).toBe(
      "E_REPORT: the report broke (slot 2023-11-14 22:00:00)",
    );
    expect(await cell("reports.broken", "lag").textContent()).toBe("13 min");
    expect(await cell("reports.nightly", "spec").textContent()).toBe("cron 0 3 * * * UTC");
    expect(await cell("reports.nightly", "next-fire").textContent()).toBe("2023-11-15 03:00:00");
    expect(await cell("reports.nightly", "last-fired").textContent()).toBe("—");

    // Orphaned: said so, no next fire, and no trigger (the API would refuse it: OKE1702).
    expect(await cell("reports.retired", "state").textContent()).toBe(
      "orphanedno longer declared; never fires",
    );
    expect(await cell("reports.retired", "next-fire").textContent()).toBe("—");
    expect(await rowOf("reports.retired").getByRole("button").allTextContents()).toEqual([
      "Pause reports.retired",
    ]);
    // Reset is offered only where an edit is in force.
    expect(await rowOf("reports.nightly").getByRole("button").allTextContents()).toEqual([
      "Pause reports.nightly",
      "Trigger reports.nightly now",
    ]);

    // All of it on a 390 px phone: the table scrolls in its box, the page does not widen.
    await cp.page.setViewportSize({ width: 390, height: 844 });
    await cp.open("#/schedules", "Schedules");
    await cell("ticks.fast", "lag").waitFor(LONG);
    expect(await cp.page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
    await cp.page.setViewportSize({ width: 1200, height: 800 });
    expect(cp.cspViolations).toEqual([]);
    expect(cp.pageErrors).toEqual([]);
  });

  it("pauses and resumes after confirming, reports what the schedule is now; cancelling changes nothing", async () => {
    await cp.open("#/schedules", "Schedules");
    cp.answer = false;
    const asked = cp.dialogs.length;
    await cp.page.getByRole("button", { name: "Pause ticks.fast" }).click(LONG);
    await expect.poll(() => cp.dialogs.length, LONG).toBe(asked + 1);
    expect(cp.dialogs.at(-1)).toBe("Pause schedule ticks.fast? It stops firing until resumed.");
    expect((await schedule("ticks.fast")).paused).toBe(false);

    cp.answer = true;
    await cp.page.getByRole("button", { name: "Pause ticks.fast" }).click();
    await statusLine().filter({ hasText: "Paused ticks.fast: paused, next fire —." }).waitFor(LONG);
    await cell("ticks.fast", "state").filter({ hasText: "paused" }).waitFor(LONG);
    expect((await schedule("ticks.fast")).paused).toBe(true);

    await cp.page.getByRole("button", { name: "Resume ticks.fast" }).click(LONG);
    await statusLine()
      .filter({ hasText: "Resumed ticks.fast: active, next fire 2023-11-14 22:13:20.250." })
      .waitFor(LONG);
    expect(cp.dialogs.at(-1)).toBe(
      "Resume schedule ticks.fast? It fires from its next slot on; slots passed while paused are skipped.",
    );
    await cell("ticks.fast", "state").filter({ hasText: "active" }).waitFor(LONG);
  });

  it("edits an overridable schedule, shows the edit against the code, resets it; a refused edit reports code and fix", async () => {
    await cp.open("#/schedules", "Schedules");
    const form = cp.page.getByRole("form", { name: "Edit a schedule" });
    // Only overridable, declared schedules can be edited.
    expect(await form.getByRole("option").allTextContents()).toEqual(["reports.nightly"]);
    await form.getByLabel("Cron").fill("not a cron");
    await form.getByRole("button", { name: "Save edit" }).click();
    const refused = statusLine().filter({ hasText: "Edit reports.nightly failed: OKE1701" });
    await refused.waitFor(LONG);
    expect(await refused.textContent()).toMatch(
      /^Edit reports\.nightly failed: OKE1701: clock "reports\.nightly": .+ \(Pass \{ cron/,
    );
    expect(await statusLine().getAttribute("class")).toBe("bad");

    await form.getByLabel("Cron").fill("30 6 * * *");
    await form.getByLabel("Time zone").fill("Europe/Paris");
    await form.getByRole("button", { name: "Save edit" }).click();
    // 06:30 in Paris is 05:30 UTC in November.
    await statusLine()
      .filter({
        hasText:
          "Edited reports.nightly: cron 30 6 * * * Europe/Paris, active, next fire 2023-11-15 05:30:00.",
      })
      .waitFor(LONG);
    expect(cp.dialogs.at(-1)).toBe(
      'Edit schedule reports.nightly: cron "30 6 * * *", timezone "Europe/Paris"? It wins over the code until reset.',
    );
    expect(await form.getByLabel("Cron").inputValue()).toBe("");
    await cell("reports.nightly", "spec")
      .filter({ hasText: "cron 30 6 * * * Europe/Paris (edited; the code says cron 0 3 * * * UTC)" })
      .waitFor(LONG);
    expect(await cell("reports.nightly", "next-fire").textContent()).toBe("2023-11-15 05:30:00");

    await cp.page.getByRole("button", { name: "Reset reports.nightly" }).click(LONG);
    await statusLine()
      .filter({ hasText: "Reset reports.nightly: active, next fire 2023-11-15 03:00:00." })
      .waitFor(LONG);
    expect(cp.dialogs.at(-1)).toBe(
      "Reset schedule reports.nightly? The operator's edit is dropped: the code's cron 0 3 * * * UTC fires again.",
    );
    await cell("reports.nightly", "spec")
      .filter({ hasText: /^cron 0 3 \* \* \* UTC$/ })
      .waitFor(LONG);
    expect((await schedule("reports.nightly")).overridden).toBe(false);
    const audit = (await apiGet<{ items: AuditItem[] }>("/api/audit?limit=5")).items;
    expect(audit.slice(0, 2).map((a) => `${a.action} ${a.target}`)).toEqual([
      "reset schedule:reports.nightly",
      "edit schedule:reports.nightly",
    ]);
  });

  it("triggers a schedule now after confirming and names the fire's message", async () => {
    await cp.open("#/schedules", "Schedules");
    await cp.page.getByRole("button", { name: "Trigger reports.nightly now" }).click(LONG);
    const done = statusLine().filter({
      hasText: "Triggered reports.nightly: message clock:reports.nightly:manual:",
    });
    await done.waitFor(LONG);
    expect(cp.dialogs.at(-1)).toBe(
      "Fire schedule reports.nightly now, outside its schedule? Its next slot stays where it is.",
    );
    const messageId = /message (\S+)\.$/.exec((await done.textContent())!)![1]!;
    await until(
      async () => (await apiGet<{ status: string }>(`/api/messages/${messageId}`)).status === "delivered",
      "the triggered fire delivered",
    );
  });
});
