// The Console's Schedules view mid rolling deploy: the store holds another version's spec, the view says so and why, and Reset names the spec it makes fire.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { consoleApi, LONG, openConsolePage, type ConsolePage } from "../support/console-browser.ts";
import { createApp } from "../../src/app/app.ts";
import type { App } from "../../src/app/types.ts";
import type { Duration } from "../../src/clock/duration.ts";
import { createTimeTravel } from "../../src/clock/time-travel.ts";
import { clock, flow, on } from "../../src/index.ts";
import { createMemoryStore } from "../../src/store/memory/memory-store.ts";

const TOKEN = "browser-schedules-versions-token-0123";
/** 2023-11-14 22:13:20 UTC. Time stands still: no slot comes due during the test. */
const T0 = 1_700_000_000_000;

/** The same clock in two versions of the app: only its interval differs. */
const version = (every: Duration) => ({
  tick: on(clock("x.tick", { every, overridable: true }), flow("x.tick", { do: () => undefined })),
});

/** The note v2's Console gives while the store holds v1's 10 s, with what fires now. */
const note = (firing: string): string =>
  `the store has every 10s, declared by another instance's code (a different version of the app); ` +
  `this instance's code declares every 20s. ${firing}: the last instance to boot sets a clock's spec ` +
  `for the whole fleet; finish the deploy, or restart this instance to make its code's spec current`;

interface View {
  every: string | null;
  overridden: boolean;
  declared: { every: string | null };
  declaredElsewhere: { every: string | null } | null;
  declaredElsewhereNote: string | null;
}

describe("the Console's Schedules view when another version's spec is stored", () => {
  const time = createTimeTravel(T0);
  const store = createMemoryStore();
  let v1: App;
  let v2: App;
  let url: string;
  let cp: ConsolePage;

  const schedule = async (): Promise<View> =>
    (
      await consoleApi(url, TOKEN).get<{ schedules: Array<View & { name: string }> }>("/api/schedules")
    ).schedules.find((s) => s.name === "x.tick")!;
  const spec = () => cp.page.locator('main tr[data-key="schedule x.tick"] td.spec');
  const specNote = () => spec().locator("div.other-version");

  beforeAll(async () => {
    // v2 (every 20s) serves the Console; v1 (every 10s) boots after it, so the store holds v1's spec.
    v2 = createApp({
      modules: [version("20s")],
      env: "test",
      clock: time,
      store,
      config: { console: { port: 0, tokens: { alice: TOKEN } } },
    });
    url = (await v2.start({ port: 0, host: "127.0.0.1" })).console!.url;
    v1 = createApp({ modules: [version("10s")], env: "test", clock: time, store });
    await v1.start({ port: 0, host: "127.0.0.1" });
    cp = await openConsolePage(url, TOKEN);
  });
  afterAll(async () => {
    await cp?.close();
    await v1?.stop({ timeoutMs: 2_000 });
    await v2?.stop({ timeoutMs: 2_000 });
    await store.close();
  });

  it("marks the spec in force as the other version's, with this instance's own, and shows the note under it", async () => {
    // What the page is given: v1's 10 s fires, v2's code says 20 s.
    expect(await schedule()).toMatchObject({
      every: "10s",
      declared: { every: "20s" },
      declaredElsewhere: { every: "10s" },
      declaredElsewhereNote: note("The stored every 10s fires now, on every instance"),
    });
    await cp.open("#/schedules", "Schedules");
    await specNote().waitFor(LONG);
    expect(await specNote().textContent()).toBe(note("The stored every 10s fires now, on every instance"));
    expect(await spec().textContent()).toBe(
      "every 10s (other version; this instance's code says every 20s)" +
        note("The stored every 10s fires now, on every instance"),
    );
    expect(cp.cspViolations).toEqual([]);
    expect(cp.pageErrors).toEqual([]);
  });

  it("under an operator edit, shows both declarations; Reset's confirmation names the stored spec it makes fire", async () => {
    await v2.operator.schedules.edit("x.tick", { every: "5m" });
    await cp.open("#/schedules", "Schedules");
    await spec()
      .filter({ hasText: /^every 5m / })
      .waitFor(LONG);
    expect(await spec().textContent()).toBe(
      "every 5m (edited; other version: the store has every 10s, this instance's code says every 20s)" +
        note(
          "The operator's edit (every 5m) fires now, on every instance, and the stored every 10s after a reset",
        ),
    );

    cp.answer = true;
    const asked = cp.dialogs.length;
    await cp.page.getByRole("button", { name: "Reset x.tick" }).click(LONG);
    await cp.page.locator("#status").filter({ hasText: "Reset x.tick: active, next fire " }).waitFor(LONG);
    expect(cp.dialogs.slice(asked)).toEqual([
      "Reset schedule x.tick? The operator's edit is dropped: the stored every 10s, declared by another " +
        "version's code, fires again (this instance's code declares every 20s).",
    ]);
    // The reset made v1's stored 10 s fire, as the dialog said, and the view says so again.
    expect(await schedule()).toMatchObject({ every: "10s", overridden: false });
    await spec()
      .filter({ hasText: /^every 10s \(other version;/ })
      .waitFor(LONG);
    expect(cp.cspViolations).toEqual([]);
    expect(cp.pageErrors).toEqual([]);
  });
});
