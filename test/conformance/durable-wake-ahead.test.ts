// PostgreSQL: the instance that parked a run reserves it wakeLookaheadMs before its wake time (lease taken, still sleeping) and resumes it at that time.
import { describe, expect, it } from "vitest";
import { createTimeTravel, flow, type Duration } from "../../src/index.ts";
import type { Store } from "../../src/store/types.ts";
import { appFactory, until } from "./app-fixture.ts";
import { drivers } from "./drivers.ts";

const T0 = 1_000_000;
const NAP = 30_000;
const WAKE = T0 + NAP;
const postgres = drivers.find((d) => d.name === "postgres")!;

/** A durable flow: a step, a sleep (30 s unless told), then a line in `ran`. */
function napper(name: string, ran: string[], nap: Duration = "30s") {
  return flow(name, {
    durable: true,
    do: async (_: unknown, fx) => {
      await fx.step("before", () => ran.push("before"));
      await fx.clock.sleep("nap", nap);
      ran.push("after");
    },
  });
}

async function onlyRun(store: Store) {
  const [run] = await store.listRuns({});
  return run!;
}

/** The run is reserved: its lease taken ahead of the wake, its status and wakeAt still a sleeper's. */
async function reserved(store: Store): Promise<boolean> {
  const run = await onlyRun(store);
  return run.status === "sleeping" && run.leaseOwner !== null;
}

describe("postgres: a sleeper is reserved ahead of its wake time", () => {
  const apps = appFactory(postgres);

  /**
   * One instance, on its own time travel from T0, parks a napper's run, is moved to 20 ms before the
   * wake time (inside the lookahead) and has reserved the run: `held` is the run as reserved.
   */
  async function reservedRun(name: string, opts: { nap?: Duration; wakeAt?: number } = {}) {
    const store = await apps.store();
    const ran: string[] = [];
    const nap = napper(name, ran, opts.nap);
    const time = createTimeTravel(T0);
    const app = await apps.make([{ nap }], { store, time });
    await app.invoke(nap, {});
    time.set((opts.wakeAt ?? WAKE) - 20);
    await until(() => reserved(store), "reserved ahead");
    const held = await onlyRun(store);
    return { store, ran, nap, time, app, held };
  }

  it("is claimed within the lookahead, held, and resumed at its wake time, not before", async () => {
    const store = await apps.store();
    expect(store.wakeLookaheadMs).toBe(50);
    const ran: string[] = [];
    const nap = napper("ahead.nap", ran);
    const app = await apps.make([{ nap }], { store });
    await app.invoke(nap, {});
    expect(await onlyRun(store)).toMatchObject({ status: "sleeping", wakeAt: WAKE });
    // Outside the lookahead: nothing is claimed.
    app.time.set(WAKE - 60);
    await app.idle();
    expect(await onlyRun(store)).toMatchObject({ status: "sleeping", wakeAt: WAKE, leaseOwner: null });
    // Inside it: reserved (a committed lease), still sleeping and listed as a sleeper with its wake
    // time; the code after the sleep waits for the wake time.
    app.time.set(WAKE - 20);
    await until(() => reserved(store), "reserved ahead");
    await app.idle();
    const { id } = await onlyRun(store);
    expect(await onlyRun(store)).toMatchObject({ status: "sleeping", wakeAt: WAKE, recoveries: 0 });
    expect(await app.operator.sleepers()).toMatchObject([{ runId: id, wakeAt: WAKE }]);
    expect((await app.operator.run(id))?.run).toMatchObject({ status: "sleeping", wakeAt: WAKE });
    expect(ran).toEqual(["before"]);
    app.time.set(WAKE - 1);
    await app.idle();
    expect(ran).toEqual(["before"]);
    expect((await onlyRun(store)).status).toBe("sleeping");
    app.time.set(WAKE);
    await until(async () => (await onlyRun(store)).status === "completed", "resumed at its wake time");
    expect(ran).toEqual(["before", "after"]);
    expect((await onlyRun(store)).recoveries).toBe(0);
  });

  it("a sleeper past the hold horizon is reserved ahead by the scan of due runs, and resumed at its wake time", async () => {
    const wake = T0 + 3_600_000;
    const { store, ran, app } = await reservedRun("ahead.long", { nap: "1h", wakeAt: wake });
    await app.idle();
    expect(await onlyRun(store)).toMatchObject({ status: "sleeping", wakeAt: wake });
    expect(ran).toEqual(["before"]);
    app.time.set(wake);
    await until(async () => (await onlyRun(store)).status === "completed", "resumed at its wake time");
    expect(ran).toEqual(["before", "after"]);
  });

  it("wake early of a reserved run resumes it at once on the instance that holds it", async () => {
    const { store, ran, app, held } = await reservedRun("ahead.early");
    const { id } = held;
    expect(await app.wakeEarly(id)).toEqual({ outcome: "resumed", runId: id });
    await until(async () => (await onlyRun(store)).status === "completed", "resumed early");
    expect(ran).toEqual(["before", "after"]);
  });

  it("wake early of a reserved run on another instance moves its wake time only; its holder resumes it at the original one", async () => {
    const { store, ran, nap, time, held } = await reservedRun("ahead.early-elsewhere");
    const { id, leaseOwner } = held;
    const b = await apps.make([{ nap }], { store, time });
    expect(await b.wakeEarly(id)).toEqual({ outcome: "wake time only", runId: id });
    await b.idle();
    expect(await onlyRun(store)).toMatchObject({ status: "sleeping", wakeAt: WAKE - 20, leaseOwner });
    expect(ran).toEqual(["before"]);
    time.set(WAKE);
    await until(async () => (await onlyRun(store)).status === "completed", "resumed by its holder");
    expect(ran).toEqual(["before", "after"]);
    expect((await onlyRun(store)).recoveries).toBe(0);
  });

  it("a stop releases a reservation (still sleeping, no lease): another instance resumes it at its wake time, no recovery", async () => {
    const { store, ran, nap, time, app: a } = await reservedRun("ahead.stop");
    await a.stop({ timeoutMs: 2_000 });
    // Not resumed, and not running: a sleeper again, its wake time unchanged.
    expect(await onlyRun(store)).toMatchObject({ status: "sleeping", wakeAt: WAKE, leaseOwner: null });
    expect(ran).toEqual(["before"]);
    const b = await apps.make([{ nap }], { store, time });
    await b.idle();
    expect(ran).toEqual(["before"]);
    time.set(WAKE);
    await until(async () => (await onlyRun(store)).status === "completed", "resumed by the other instance");
    expect(ran).toEqual(["before", "after"]);
    // Nothing ran under the reservation: its takeover is a sleeper's wake, not a recovery.
    expect((await onlyRun(store)).recoveries).toBe(0);
  });

  it("another instance's claim skips a live reservation", async () => {
    const { store, app: a, held } = await reservedRun("ahead.skip");
    // B is past the wake time but inside A's reservation lease: it takes nothing.
    const got = await store.claimDueRuns({ owner: "b/1", now: WAKE + 1, max: 10, leaseMs: 30_000 });
    expect(got).toEqual([]);
    expect(await onlyRun(store)).toMatchObject({ status: "sleeping", leaseOwner: held.leaseOwner });
    await a.stop({ timeoutMs: 2_000 });
  });

  it("an instance that dies holding a reservation: its lease lapses and another instance wakes the run, once, one recovery (its lease outlived the wake time)", async () => {
    // A's clock stops inside the lookahead: its local timer never fires, as if its process were gone.
    const { store, ran, nap, app: a, held } = await reservedRun("ahead.died");
    expect(held.leaseExpiresAt).toBeGreaterThan(WAKE);
    const b = await apps.make([{ nap }], { store, time: createTimeTravel(held.leaseExpiresAt! + 1) });
    await until(async () => (await onlyRun(store)).status === "completed", "resumed by the other instance");
    await b.idle();
    expect(ran).toEqual(["before", "after"]);
    // The store cannot tell A dying before its wake from A dying in the step after it: counted once.
    expect((await onlyRun(store)).recoveries).toBe(1);
    // A's stop releases nothing it no longer holds.
    await a.stop({ timeoutMs: 2_000 });
    expect(await onlyRun(store)).toMatchObject({ status: "completed" });
  });

  it("an instance that resumes a reservation after it lapsed and another instance took the run runs none of its code again", async () => {
    // A's clock stalls inside the lookahead (an event loop stuck past its lease); B takes the run
    // once the reservation lapsed, and completes it.
    const { store, ran, nap, time, app: a, held } = await reservedRun("ahead.lapsed");
    const b = await apps.make([{ nap }], { store, time: createTimeTravel(held.leaseExpiresAt! + 1) });
    await until(async () => (await onlyRun(store)).status === "completed", "completed by the other instance");
    await b.idle();
    expect(ran).toEqual(["before", "after"]);
    // A comes back past its lease: its timer fires and it resumes what it reserved. The claim is
    // refused, so the code after the sleep must not run (before the fix, "after" ran twice).
    time.set(held.leaseExpiresAt! + 2);
    await a.idle();
    expect(ran).toEqual(["before", "after"]);
    expect(await onlyRun(store)).toMatchObject({ status: "completed" });
  });

  it("a reserved run whose claim at its wake time meets an outage retries it: the code after the sleep runs once", async () => {
    // A's claims of the run by id fail twice at its wake time, as through a PostgreSQL restart: the
    // claim that sets a reserved run running goes out after the code after the sleep started. It
    // was tried twice, then given up: that code's writes were refused (the run still a sleeper), and
    // once the reservation lapsed another instance ran it again (before the fix: "after" twice).
    const base = await apps.store();
    let failing = 0;
    const store = new Proxy(base, {
      get(target, prop) {
        const v: unknown = Reflect.get(target, prop, target);
        if (typeof v !== "function") return v;
        const f = v as (req: { runIds?: string[] }) => Promise<unknown>;
        if (prop !== "claimDueRuns") return f.bind(target);
        return async (req: { runIds?: string[] }) => {
          if (failing > 0 && req.runIds !== undefined) {
            failing--;
            throw Object.assign(new Error("terminating connection due to administrator command"), {
              code: "57P01",
            });
          }
          return f.call(target, req);
        };
      },
    });
    const ran: string[] = [];
    const nap = napper("ahead.outage", ran);
    const time = createTimeTravel(T0);
    const a = await apps.make([{ nap }], { store, time });
    await a.invoke(nap, {});
    time.set(WAKE - 20);
    await until(() => reserved(base), "reserved ahead");
    const held = await onlyRun(base);
    failing = 2;
    time.set(WAKE);
    await until(async () => ran.includes("after"), "resumed at its wake time");
    await a.idle();
    expect(failing).toBe(0);
    // Another instance, past the reservation's lease: a run left unfinished would be resumed here.
    const b = await apps.make([{ nap }], { store: base, time: createTimeTravel(held.leaseExpiresAt! + 1) });
    await until(async () => (await onlyRun(base)).status === "completed", "completed");
    await b.idle();
    expect(ran).toEqual(["before", "after"]);
    expect(await onlyRun(base)).toMatchObject({ status: "completed", recoveries: 0 });
  });

  it("a reserved run holds its resume permit: with concurrency 1 a second sleeper waits for it", async () => {
    const store = await apps.store();
    const ran: string[] = [];
    const nap = napper("ahead.permits", ran);
    const app = await apps.make([{ nap }], { store, config: { durable: { concurrency: 1 } } });
    await app.invoke(nap, {});
    app.time.set(T0 + 5);
    await app.invoke(nap, {});
    const statuses = async () =>
      (await store.listRuns({})).map((r) => `${r.status}:${r.wakeAt === null ? "-" : r.wakeAt - WAKE}`);
    expect(await statuses()).toEqual(["sleeping:0", "sleeping:5"]);
    // Both are inside the lookahead; one permit, so only the first is reserved.
    app.time.set(WAKE - 20);
    const leased = async () => (await store.listRuns({})).map((r) => r.leaseOwner !== null);
    await until(async () => (await leased()).includes(true), "first reserved ahead");
    await app.idle();
    expect(await statuses()).toEqual(["sleeping:0", "sleeping:5"]);
    expect(await leased()).toEqual([true, false]);
    expect(ran).toEqual(["before", "before"]);
    app.time.set(WAKE + 5);
    await until(
      async () => (await store.listRuns({ status: "completed" })).length === 2,
      "both resumed, one after the other",
    );
    expect(ran).toEqual(["before", "before", "after", "after"]);
  });
});
