// The Console page in headless Chromium: a message's failure history shows the attempts whose lease lapsed and where a replay begins; a run page explains its recoveries.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Page } from "playwright-core";
import { openConsolePage, type ConsolePage } from "../support/console-browser.ts";
import { createApp } from "../../src/app/app.ts";
import type { App } from "../../src/app/types.ts";
import { createTimeTravel } from "../../src/clock/time-travel.ts";
import { flow } from "../../src/index.ts";
import { spentSettlement } from "../../src/signal/attempt-budget.ts";
import { createMemoryStore } from "../../src/store/memory/memory-store.ts";
import type { Store } from "../../src/store/types.ts";

const TOKEN = "browser-attempts-token-0123456789";
/** 2023-11-14 22:13:20 UTC. Time stands still unless the test moves it. */
const T0 = 1_700_000_000_000;
const LEASE_MS = 30_000;
/** A signal no pool of the app claims: the test claims it as workers would, and lets leases lapse. */
const SIGNAL = "jobs.unserved";

const lapsedText = (n: number): string =>
  `no outcome recorded — its lease (30 s) lapsed before it settled (handler crashed, hung or ran past the lease, its process died, or it never left the prefetch buffer); reclaimed as attempt ${n + 1}`;

describe("the Console page: lapsed attempts, replay boundaries, recoveries", () => {
  const time = createTimeTravel(T0);
  let store: Store;
  let app: App;
  let url: string;
  let cp: ConsolePage;
  let page: Page;

  const claim = async (worker: string): Promise<number> => {
    const [m] = await store.claim({ signal: SIGNAL, worker, max: 1, now: time.now(), leaseMs: LEASE_MS });
    return m!.attempts;
  };

  beforeAll(async () => {
    store = createMemoryStore();
    app = createApp({
      modules: [{ idle: flow("idle.flow", { do: () => undefined }) }],
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

  it("a message's failure history lists each attempt whose lease lapsed, and a line where the replayed delivery's attempts begin", async () => {
    await store.enqueue(
      [{ id: "m_slow", signal: SIGNAL, key: null, payload: { n: 1 }, parentRunId: null }],
      time.now(),
    );
    // retries 1: attempt 1 outlives its lease, attempt 2 too, and claim 3 finds the budget spent.
    expect(await claim("w1")).toBe(1);
    time.advance(LEASE_MS + 1);
    expect(await claim("w2")).toBe(2);
    time.advance(LEASE_MS + 1);
    const [spent] = await store.claim({
      signal: SIGNAL,
      worker: "w3",
      max: 1,
      now: time.now(),
      leaseMs: LEASE_MS,
    });
    expect(spent!.attempts).toBe(3);
    await store.settle(
      [spentSettlement(spent!, { name: SIGNAL, retries: 1, deadLetter: true }, "w3", time.now())],
      time.now(),
    );
    // Replayed; its attempt 1 lapses too and attempt 2 is in flight.
    expect(await store.replay(SIGNAL, ["m_slow"], time.now())).toEqual(["m_slow"]);
    expect(await claim("w4")).toBe(1);
    time.advance(LEASE_MS + 1);
    expect(await claim("w5")).toBe(2);

    await cp.open("#/message/m_slow", "Message m_slow");
    const rows = page.locator("main h2:text-is('Failure history') + div.scroll tbody tr");
    expect(await rows.evaluateAll((trs) => trs.map((tr) => tr.getAttribute("data-key")))).toEqual([
      "lapsed 0 1",
      "failure 0",
      "replay 1",
      "lapsed 1 1",
    ]);
    const text = await rows.evaluateAll((trs) =>
      trs.map((tr) => [...tr.querySelectorAll("td")].map((td) => td.textContent)),
    );
    expect(text).toEqual([
      ["1", "—", "none", lapsedText(1)],
      [
        "2",
        "2023-11-14 22:14:20",
        "LEASE_EXPIRED",
        `attempt 2 of "${SIGNAL}" did not finish within its lease: its handler ran past the lease (slow or hung), crashed, or lost its process, and all 2 attempts are spent`,
      ],
      ["— replay 1 of 1: attempts count from 1 again —"],
      ["1", "—", "none", lapsedText(1)],
    ]);
    expect(cp.pageErrors).toEqual([]);
    expect(cp.cspViolations).toEqual([]);
  });

  it("a run that was taken over says so in one line under its counts, with durable.maxRecoveries", async () => {
    // A flow this app does not have, so none of its schedulers takes the run over itself.
    await store.startRun({
      id: "r_taken",
      flow: "retired.flow",
      input: null,
      parentRunId: null,
      owner: "dead/1",
      now: time.now(),
      leaseMs: LEASE_MS,
    });
    time.advance(LEASE_MS + 1);
    await store.acquireRun({ runId: "r_taken", owner: "alive/1", now: time.now(), leaseMs: LEASE_MS });
    await store.finish({
      runId: "r_taken",
      owner: "alive/1",
      now: time.now(),
      status: "completed",
      output: 1,
    });
    await cp.open("#/run/r_taken", "Run r_taken");
    expect(await page.locator("#recovered").textContent()).toBe(
      'recovered 1 time (of at most 10: durable.maxRecoveries): its holder stopped renewing the lease (process killed, crashed or stalled) and another instance took the run over once it lapsed; the entry after a takeover includes that wait. The log line "durable run "r_taken" (retired.flow) taken over from <holder>" names the holder',
    );
    expect(cp.pageErrors).toEqual([]);
    expect(cp.cspViolations).toEqual([]);
  });
});
