// A durable consumer's run whose holder died on the message's last attempt: message and run end the same way, the body never runs again.
import { describe, expect, it } from "vitest";
import { flow, on, signal } from "../../src/index.ts";
import { createTimeTravel } from "../../src/clock/time-travel.ts";
import { entryName, type JournalEntry, type Store } from "../../src/store/types.ts";
import { appFactory, recordingLogger, until, type TestApp } from "./app-fixture.ts";
import { drivers } from "./drivers.ts";

const T0 = 1_000_000;
const SIGNAL = "jobs.spent";
const ID = "m-spent-1";
const spentText = (attempt: number) =>
  `attempt ${attempt} of "${SIGNAL}" did not finish within its lease: its handler ran past the lease (slow or hung), crashed, or lost its process, and all 2 attempts are spent`;

describe.each(drivers)("durable consumer whose message spent its attempts, on the $name driver", (driver) => {
  const apps = appFactory(driver);

  /** charge (with an undo) → ship. `retries: 1`: two attempts. */
  function consumer() {
    const ran = { charge: 0, ship: 0, undo: 0 };
    const jobs = signal.once(SIGNAL, { retries: 1 });
    const w = on(
      jobs,
      flow(SIGNAL, {
        durable: true,
        do: async (_: unknown, fx) => {
          await fx.step("charge", () => (ran.charge++, "c1"), { undo: () => void ran.undo++ });
          await fx.step("ship", () => (ran.ship++, "s1"));
          return "shipped";
        },
      }),
    );
    return { ran, w };
  }

  /**
   * What a dead instance leaves behind, written through the store: the message claimed `claims`
   * times by a worker that is gone (the last claim's lease until `lastLeaseUntil`), the run started
   * on the last attempt with `entries` journaled and its lease lapsed at T0 + 3 s.
   */
  async function deadInstance(store: Store, claims: number, lastLeaseUntil: number, entries: string[]) {
    await store.open();
    await store.enqueue([{ id: ID, signal: SIGNAL, key: null, payload: {}, parentRunId: null }], T0);
    for (let n = 1; n <= claims; n++) {
      const at = n === claims ? lastLeaseUntil - 1_000 : T0 + (n - 1) * 1_000;
      const got = await store.claim({
        signal: SIGNAL,
        worker: "dead-worker",
        max: 1,
        now: at,
        leaseMs: 1_000,
      });
      expect(got.map((m) => m.attempts)).toEqual([n]);
    }
    await store.startRun({
      id: ID,
      flow: SIGNAL,
      input: {},
      parentRunId: null,
      owner: "dead/1",
      now: T0 + 2_000,
      leaseMs: 1_000,
    });
    const journal: JournalEntry[] = entries.map((name, seq) => ({
      runId: ID,
      seq,
      kind: "step",
      name,
      value: name === "charge" ? "c1" : "s1",
      at: T0 + 2_000,
    }));
    if (journal.length > 0)
      await store.append({ runId: ID, owner: "dead/1", now: T0 + 2_000, entries: journal });
  }

  /**
   * Waits until the message settled as `status`, letting a message lease lapse (1 s) whenever the
   * app is idle: a claim that found the run held by another path leaves the message to its lease.
   */
  async function settled(app: TestApp, status: "dead" | "delivered"): Promise<void> {
    for (let lapse = 0; lapse <= 10; lapse++) {
      // Not app.idle(): it waits for the queue itself, and a message left to its lease keeps it busy.
      await new Promise((r) => setTimeout(r, 50));
      const m = await app.store.getMessage(ID);
      if (m?.status === status) return void (await app.idle());
      if (m?.status !== "inflight") throw new Error(`message ${m?.status}, expected ${status}`);
      app.time.advance("1s");
    }
    throw new Error(`message not ${status} after 10 leases`);
  }

  const boot = async (store: Store, w: unknown, at: number) => {
    const { logger, records } = recordingLogger();
    const app = await apps.make([{ w }], {
      store,
      time: createTimeTravel(at),
      config: { signals: { leaseMs: 1_000 }, durable: { leaseMs: 60_000 } },
      logger,
    });
    return { app, records };
  };

  it("last attempt's holder died: the run fails with LEASE_EXPIRED after its undo, the message is dead with the same failure, no step runs again", async () => {
    const store = await apps.store();
    const { ran, w } = consumer();
    await deadInstance(store, 2, T0 + 2_000, ["charge"]);
    // Both leases lapsed: the claim past the budget and the orphan scan may both find it; either ends it.
    const { app, records } = await boot(store, w, T0 + 10_000);
    await settled(app, "dead");
    expect(await store.getRun(ID)).toMatchObject({
      status: "failed",
      error: { code: "LEASE_EXPIRED", message: spentText(2) },
      leaseOwner: null,
    });
    expect(ran).toEqual({ charge: 0, ship: 0, undo: 1 });
    expect((await store.getJournal(ID)).map(entryName)).toEqual(["charge", "undo:charge"]);
    const m = (await store.getMessage(ID))!;
    expect(m.failures.at(-1)).toMatchObject({ code: "LEASE_EXPIRED", message: spentText(2) });
    expect(
      records.filter((r) => String(r.msg).startsWith("durable run: its message spent every attempt")),
    ).toHaveLength(1);
  });

  it("the orphan scan finds the run of a message claimed past its budget: it ends the run, and the message's next claim dead-letters it with the run's failure", async () => {
    const store = await apps.store();
    const { ran, w } = consumer();
    // A third claim (past the budget) by the dead worker still holds the message's lease: only the run is free.
    await deadInstance(store, 3, T0 + 60_000, ["charge"]);
    const { app, records } = await boot(store, w, T0 + 10_000);
    await until(async () => (await store.getRun(ID))?.status === "failed", "the run ended");
    expect(await store.getRun(ID)).toMatchObject({ error: { code: "LEASE_EXPIRED", message: spentText(2) } });
    expect(ran).toEqual({ charge: 0, ship: 0, undo: 1 });
    expect(records.find((r) => String(r.msg).startsWith("durable run: its message spent"))).toMatchObject({
      via: "resume",
    });
    expect(await store.getMessage(ID)).toMatchObject({ status: "inflight", attempts: 3 });
    app.time.advance("60s");
    await settled(app, "dead");
    expect((await store.getMessage(ID))!.failures.at(-1)).toMatchObject({
      code: "LEASE_EXPIRED",
      message: spentText(2),
    });
    await app.idle();
    expect(ran).toEqual({ charge: 0, ship: 0, undo: 1 });
  });

  it("a message dead-lettered already beside a live run (its spent claim could not read the run): the orphan scan ends the run with the message's own failure", async () => {
    const store = await apps.store();
    const { ran, w } = consumer();
    await deadInstance(store, 2, T0 + 2_000, ["charge"]);
    const failure = { code: "LEASE_EXPIRED", message: "written while the store was unreachable" };
    await store.settle(
      [
        {
          id: ID,
          worker: "dead-worker",
          attempt: 2,
          status: "dead",
          failure: { ...failure, at: T0 + 3_000, attempt: 2 },
        },
      ],
      T0 + 3_000,
    );
    const { app } = await boot(store, w, T0 + 10_000);
    await until(async () => (await store.getRun(ID))?.status === "failed", "the run ended");
    await app.idle();
    expect(await store.getRun(ID)).toMatchObject({ error: failure });
    expect(ran).toEqual({ charge: 0, ship: 0, undo: 1 });
    expect(await store.getMessage(ID)).toMatchObject({ status: "dead", attempts: 2 });
  });

  it("a journal that already holds the whole body: the run completes without running a step, the message is delivered", async () => {
    const store = await apps.store();
    const { ran, w } = consumer();
    await deadInstance(store, 2, T0 + 2_000, ["charge", "ship"]);
    const { app } = await boot(store, w, T0 + 10_000);
    await settled(app, "delivered");
    expect(await store.getRun(ID)).toMatchObject({ status: "completed", output: "shipped" });
    expect(ran).toEqual({ charge: 0, ship: 0, undo: 0 });
    expect(await app.operator.deadLetters(SIGNAL)).toEqual([]);
  });

  it("with an attempt left the run is resumed as before: its next step runs once and the message is delivered", async () => {
    const store = await apps.store();
    const { ran, w } = consumer();
    await deadInstance(store, 1, T0 + 1_000, ["charge"]);
    const { app } = await boot(store, w, T0 + 10_000);
    await settled(app, "delivered");
    await app.idle();
    expect(await store.getRun(ID)).toMatchObject({ status: "completed", output: "shipped" });
    expect(ran).toEqual({ charge: 0, ship: 1, undo: 0 });
  });

  it("its last attempt dropped from the worker buffer unrun (lease out while it waited for a slot), no run yet: dead at once with the never-started failure, not the crash text", async () => {
    const store = await apps.store();
    await store.open();
    // retries 0: the first claim is the last attempt. m1 holds the one slot while m2 waits in the buffer.
    const jobs = signal.once(SIGNAL, { retries: 0 });
    let release!: () => void;
    const blocked = new Promise<void>((r) => (release = r));
    const started: string[] = [];
    const w = on(
      jobs,
      flow(SIGNAL, {
        durable: true,
        do: async (p: { id: string }, fx) => {
          await fx.step("work", async () => {
            started.push(p.id);
            if (p.id === "m1") await blocked;
            return p.id;
          });
          return "done";
        },
      }),
    );
    await store.enqueue(
      ["m1", "m2"].map((id) => ({ id, signal: SIGNAL, key: null, payload: { id }, parentRunId: null })),
      T0,
    );
    const { logger, records } = recordingLogger();
    const app = await apps.make([{ w }], {
      store,
      time: createTimeTravel(T0),
      config: { signals: { leaseMs: 1_000, concurrency: 1, prefetch: 1 }, durable: { leaseMs: 60_000 } },
      logger,
    });
    await until(() => started.length === 1, "m1 started, m2 buffered");
    app.time.advance("1s"); // m2's lease (claimed with m1's) runs out in the buffer
    release();
    await until(async () => (await store.getMessage("m2"))?.status === "dead", "m2 settled");
    await app.idle();
    expect(started).toEqual(["m1"]);
    expect(await store.getRun("m2")).toBeUndefined();
    const m2 = (await store.getMessage("m2"))!;
    expect(m2.attempts).toBe(1); // settled under the dropped claim, not by a claim past the budget
    expect(m2.failures.map((f) => [f.code, f.message])).toEqual([
      [
        "LEASE_EXPIRED",
        `attempt 1 of "${SIGNAL}" never started: its lease (1 s) ran out while it waited in this instance's buffer for a worker slot, and all 1 attempts are spent`,
      ],
    ]);
    expect(await store.getMessage("m1")).toMatchObject({ status: "delivered" });
    expect(records.filter((r) => r.messageId === "m2").map((r) => String(r.msg))).toEqual([
      "buffered message dropped: its lease (1 s) ran out before a slot freed up; it held its last attempt (1), so it is settled without running it: with its run, or dead (LEASE_EXPIRED, never started) when it has none",
    ]);
  });

  it("on its last attempt, a run another holder completed between the attempt's read and its take: the message is delivered, not dead with OKE1310", async () => {
    const store = await apps.store();
    await store.open();
    const { ran, w } = consumer();
    await store.enqueue([{ id: ID, signal: SIGNAL, key: null, payload: {}, parentRunId: null }], T0);
    // Attempt 1 made and lapsed (a process that died before it started the run): the app's claim is the last.
    await store.claim({ signal: SIGNAL, worker: "dead-worker", max: 1, now: T0, leaseMs: 1_000 });
    // The app's take of the run finds it completed: a resume elsewhere finished it just after the
    // attempt read "no run" (what a chaos run under load hit: 2 messages of 40 dead with OKE1310).
    let raced = 0;
    const racing = new Proxy(store, {
      get(target, prop) {
        if (prop === "startRun")
          return async (req: Parameters<Store["startRun"]>[0]) => {
            if (req.id === ID && raced++ === 0) {
              await target.startRun({ ...req, owner: "elsewhere/1" });
              await target.finish({
                runId: ID,
                owner: "elsewhere/1",
                now: req.now,
                status: "completed",
                output: "shipped",
              });
            }
            return target.startRun(req);
          };
        const v: unknown = Reflect.get(target, prop, target);
        return typeof v === "function" ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      },
    });
    const { app } = await boot(racing, w, T0 + 10_000);
    await until(async () => (await store.getMessage(ID))?.status !== "inflight", "message settled");
    await app.idle();
    expect(raced).toBe(1);
    expect(await store.getRun(ID)).toMatchObject({ status: "completed", output: "shipped" });
    expect(await store.getMessage(ID)).toMatchObject({ status: "delivered", attempts: 2, failures: [] });
    expect(ran).toEqual({ charge: 0, ship: 0, undo: 0 });
  });
});
