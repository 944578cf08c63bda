// durable.maxRecoveries on every driver: a run taken over after a lapsed lease more often than it allows ends from its journal (OKE1303), its undos run, nothing re-runs.
import { describe, expect, it } from "vitest";
import { flow, http, on, signal } from "../../src/index.ts";
import { createTimeTravel } from "../../src/clock/time-travel.ts";
import { entryName, type Store } from "../../src/store/types.ts";
import { appFactory, recordingLogger, until, type TestApp } from "./app-fixture.ts";
import { drivers } from "./drivers.ts";

const T0 = 1_000_000;
const RUN = "r-poison-1";
const FLOW = "poison.work";

describe.each(drivers)("durable.maxRecoveries on the $name driver", (driver) => {
  const apps = appFactory(driver);

  /** A durable flow: charge (with an undo) → ship, counting what ran. */
  function body(name: string) {
    const ran = { charge: 0, ship: 0, undo: 0 };
    const f = flow(name, {
      durable: true,
      do: async (_: unknown, fx) => {
        await fx.step("charge", () => (ran.charge++, "c1"), { undo: () => void ran.undo++ });
        await fx.step("ship", () => (ran.ship++, "s1"));
        return "shipped";
      },
    });
    return { ran, f };
  }

  /**
   * A run whose holders died `recoveries + 1` times: started by "dead/0" with charge journaled, then
   * taken over after each lapsed lease by dead instances that died too; its last lease lapsed at
   * T0 + (recoveries + 1) s.
   */
  async function diedRepeatedly(store: Store, flowName: string, recoveries: number): Promise<void> {
    await store.open();
    await store.startRun({
      id: RUN,
      flow: flowName,
      input: {},
      parentRunId: null,
      owner: "dead/0",
      now: T0,
      leaseMs: 1_000,
    });
    await store.append({
      runId: RUN,
      owner: "dead/0",
      now: T0,
      entries: [{ runId: RUN, seq: 0, kind: "step", name: "charge", value: "c1", at: T0 }],
    });
    for (let n = 1; n <= recoveries; n++)
      await store.acquireRun({ runId: RUN, owner: `dead/${n}`, now: T0 + n * 1_000, leaseMs: 1_000 });
    expect((await store.getRun(RUN))?.recoveries).toBe(recoveries);
  }

  const boot = async (store: Store, modules: Record<string, unknown>, maxRecoveries: number) => {
    const { logger, records } = recordingLogger();
    const app = await apps.make([modules], {
      store,
      time: createTimeTravel(T0 + 60_000),
      config: { signals: { leaseMs: 1_000 }, durable: { leaseMs: 60_000, maxRecoveries } },
      logger,
    });
    return { app, records };
  };

  const poisonText = (recoveries: number, max: number, flowName = FLOW) =>
    `journal: run "${RUN}" (${flowName}) was recovered ${recoveries} times, more than durable.maxRecoveries (${max}); ended without running again`;

  it("past the bound the boot orphan scan ends the run: replay only, its undo runs once, failed with OKE1303 naming run, flow, count and option, logged at error level once", async () => {
    const store = await apps.store();
    const { ran, f } = body(FLOW);
    await diedRepeatedly(store, FLOW, 2);
    const { app, records } = await boot(store, { f: on(http.post("/w"), f) }, 2);
    await until(async () => (await store.getRun(RUN))?.status === "failed", "the run ended");
    await app.idle();
    expect(await store.getRun(RUN)).toMatchObject({
      status: "failed",
      recoveries: 3,
      leaseOwner: null,
      error: { code: "OKE1303", message: poisonText(3, 2) },
    });
    expect(ran).toEqual({ charge: 0, ship: 0, undo: 1 });
    expect((await store.getJournal(RUN)).map(entryName)).toEqual(["charge", "undo:charge"]);
    const errors = records.filter((r) => r.level === 50 && r.runId === RUN);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatchObject({
      code: "OKE1303",
      recoveries: 3,
      maxRecoveries: 2,
      msg: poisonText(3, 2),
    });
    // The operator API shows the count beside the failure.
    expect((await app.operator.run(RUN))?.run).toMatchObject({ recoveries: 3, error: { code: "OKE1303" } });
  });

  it("a compensating run past the bound still finishes its undos (they are not skipped), and each such recovery is logged at error level", async () => {
    const store = await apps.store();
    const { ran, f } = body(FLOW);
    await diedRepeatedly(store, FLOW, 0);
    const failure = { code: "E_SHIP", message: "ship failed" };
    await store.beginCompensation({ runId: RUN, owner: "dead/0", now: T0, error: failure });
    for (let n = 1; n <= 2; n++)
      await store.acquireRun({ runId: RUN, owner: `dead/${n}`, now: T0 + n * 1_000, leaseMs: 1_000 });
    const { app, records } = await boot(store, { f: on(http.post("/w"), f) }, 1);
    await until(async () => (await store.getRun(RUN))?.status === "failed", "the run ended");
    await app.idle();
    expect(await store.getRun(RUN)).toMatchObject({ recoveries: 3, error: failure });
    expect(ran).toEqual({ charge: 0, ship: 0, undo: 1 });
    const errors = records.filter((r) => r.level === 50 && r.runId === RUN);
    // Then the resume's own "durable run failed" line, as for any compensating run it finishes.
    expect(errors.map((r) => r.msg)).toEqual([
      `durable run "${RUN}" (${FLOW}) is compensating and was recovered 3 times, more than durable.maxRecoveries (1): one of its undos may be killing its process; they run again`,
      "durable run failed",
    ]);
  });

  it("within the bound the run resumes as before and its count shows how often it was taken over", async () => {
    const store = await apps.store();
    const { ran, f } = body(FLOW);
    await diedRepeatedly(store, FLOW, 1);
    const { app } = await boot(store, { f: on(http.post("/w"), f) }, 2);
    await until(async () => (await store.getRun(RUN))?.status === "completed", "the run completed");
    await app.idle();
    expect(await store.getRun(RUN)).toMatchObject({ output: "shipped", recoveries: 2 });
    expect(ran).toEqual({ charge: 0, ship: 1, undo: 0 });
  });

  it("a durable consumer's run past the bound: the message is dead with the run's OKE1303 failure at once, attempts left or not", async () => {
    const store = await apps.store();
    const { ran } = await poisonedConsumer(store);
    const m = (await store.getMessage(RUN))!;
    const r = (await store.getRun(RUN))!;
    expect(r).toMatchObject({ status: "failed", recoveries: 3, error: { code: "OKE1303" } });
    expect(r.error!.message).toBe(poisonText(3, 2, "poison.jobs"));
    const last = m.failures.at(-1)!;
    // The message's failure: the run's code and message (the run's error also keeps its journal detail).
    expect({ code: last.code, message: last.message }).toEqual({
      code: r.error!.code,
      message: r.error!.message,
    });
    // Far from its 6 attempts: a failure that ends the run for good is not retried.
    expect(m.attempts).toBeLessThanOrEqual(3);
    expect(ran).toEqual({ charge: 0, ship: 0, undo: 1 });
  });

  it("an operator replay of that OKE1303 dead letter runs it afresh as <id>.r1, which completes; the poisoned run stays failed with its count", async () => {
    const store = await apps.store();
    const { ran, app } = await poisonedConsumer(store);
    const [letter] = await app.operator.deadLetters("poison.jobs");
    expect(letter).toMatchObject({ id: RUN, status: "dead" });
    expect(letter!.failures.at(-1)).toMatchObject({ code: "OKE1303" });
    expect(ran).toEqual({ charge: 0, ship: 0, undo: 1 });

    // The step is fixed (here: the process no longer dies in it); the operator replays the dead letter.
    expect(await app.operator.replay("poison.jobs", [RUN])).toEqual([RUN]);
    await until(
      async () => (await store.getMessage(RUN))?.status === "delivered",
      "the replayed message delivered",
    );
    await app.idle();
    // A fresh run with a fresh journal and count: every step ran once more, nothing was undone again.
    expect(await store.getRun(`${RUN}.r1`)).toMatchObject({
      status: "completed",
      output: "shipped",
      flow: "poison.jobs",
      recoveries: 0,
    });
    expect((await store.getJournal(`${RUN}.r1`)).map(entryName)).toEqual(["charge", "ship"]);
    expect(ran).toEqual({ charge: 1, ship: 1, undo: 1 });
    expect(await store.getMessage(RUN)).toMatchObject({ status: "delivered", replays: 1 });
    expect(await app.operator.deadLetters("poison.jobs")).toEqual([]);
    // The poisoned run is kept for inspection, as it ended.
    expect(await store.getRun(RUN)).toMatchObject({
      status: "failed",
      recoveries: 3,
      error: { code: "OKE1303", message: poisonText(3, 2, "poison.jobs") },
    });
    expect((await store.getJournal(RUN)).map(entryName)).toEqual(["charge", "undo:charge"]);
  });

  /**
   * A durable consumer's run past the bound (maxRecoveries 2): its message, claimed once by a
   * worker that died with it (the run's id is the message's), recovered twice more, then an app
   * takes it over; returns once the message is dead.
   */
  async function poisonedConsumer(store: Store) {
    const { ran, f } = body("poison.jobs");
    const jobs = signal.once("poison.jobs", { retries: 5 });
    await store.open();
    await store.enqueue([{ id: RUN, signal: "poison.jobs", key: null, payload: {}, parentRunId: null }], T0);
    await store.claim({ signal: "poison.jobs", worker: "dead-worker", max: 1, now: T0, leaseMs: 1_000 });
    await diedRepeatedly(store, "poison.jobs", 2);
    const { app } = await boot(store, { w: on(jobs, f) }, 2);
    await dead(app);
    return { ran, app };
  }

  /** Until the message is dead, letting its lease lapse (1 s) whenever it waits on one. */
  async function dead(app: TestApp): Promise<void> {
    for (let lapse = 0; lapse <= 10; lapse++) {
      await new Promise((r) => setTimeout(r, 50));
      const m = await app.store.getMessage(RUN);
      if (m?.status === "dead") return void (await app.idle());
      if (m?.status !== "inflight" && m?.status !== "pending") throw new Error(`message ${m?.status}`);
      app.time.advance("1s");
    }
    throw new Error("message not dead after 10 leases");
  }
});
