// A start answered after its lease lapsed (queued behind other statements, a stalled event loop) runs none of the flow's code once another instance took the run.
import { describe, expect, it } from "vitest";
import { createTimeTravel, flow } from "../../src/index.ts";
import { JournalLeaseBusy } from "../../src/errors.ts";
import type { StartRun, Store } from "../../src/store/types.ts";
import { appFactory, gate, until } from "./app-fixture.ts";
import { drivers } from "./drivers.ts";

const T0 = 1_000_000;

/** `store` whose startRun answers only once `answer` opens: the run is stored, its starter not told. */
function slowStarts(store: Store, answer: Promise<void>): Store {
  return new Proxy(store, {
    get(target, prop) {
      const v: unknown = Reflect.get(target, prop, target);
      if (typeof v !== "function") return v;
      const f = v as (req: StartRun) => Promise<unknown>;
      if (prop !== "startRun") return f.bind(target);
      return async (req: StartRun) => {
        const acquired = await f.call(target, req);
        await answer;
        return acquired;
      };
    },
  });
}

/** `store` whose renewLease goes out only once `go` opens (the renewals of a stalled instance). */
function heldRenewals(store: Store, go: Promise<void>): Store {
  return new Proxy(store, {
    get(target, prop) {
      const v: unknown = Reflect.get(target, prop, target);
      if (typeof v !== "function") return v;
      const f = v as (req: unknown) => Promise<unknown>;
      if (prop !== "renewLease") return f.bind(target);
      return async (req: unknown) => {
        await go;
        return f.call(target, req);
      };
    },
  });
}

for (const driver of drivers) {
  describe(`${driver.name}: a start answered after its lease lapsed`, () => {
    const apps = appFactory(driver);

    it("runs none of the flow's code when another instance took the run and journaled its step meanwhile", async () => {
      // The stop-26 durable-chaos trace (r55, r121): a starter's start answered seconds late, its
      // lease lapsed; another instance took the run and journaled step a; then the starter's body
      // began with the empty journal its start returned and ran step a again (before the fix: "a"
      // twice).
      const store = await apps.store();
      const ran: string[] = [];
      const napper = flow("late.start", {
        durable: true,
        do: async (_: unknown, fx) => {
          await fx.step("a", () => ran.push("a"));
          await fx.clock.sleep("nap", "1h");
          ran.push("after");
        },
      });
      const answer = gate();
      const time = createTimeTravel(T0);
      const a = await apps.make([{ napper }], { store: slowStarts(store, answer.promise), time });
      const invoked = a.invoke(napper, {}).then(
        () => "returned",
        (e: unknown) => e,
      );
      await until(async () => (await store.listRuns({})).length === 1, "the run stored");
      const [run] = await store.listRuns({});
      // Past the start's lease, a second instance takes the run, runs step a and parks it.
      time.set(run!.leaseExpiresAt! + 1);
      const b = await apps.make([{ napper }], { store, time });
      await until(async () => (await store.getRun(run!.id))?.status === "sleeping", "taken and parked");
      expect(ran).toEqual(["a"]);
      // The start answers now: its attempt finds the run taken and ends without running any code.
      answer.open();
      expect(await invoked).toBeInstanceOf(JournalLeaseBusy);
      await a.idle();
      await b.idle();
      expect(ran).toEqual(["a"]);
      expect(await store.getRun(run!.id)).toMatchObject({ status: "sleeping" });
    });

    it("a stall past its lease between two steps: the next step does not run once another instance took the run", async () => {
      // The same between two steps (durable-chaos with event-loop stalls, r61 b: a reserved run resumed
      // on time, then its instance stalled past the reservation; another instance took the run and
      // completed it, and the stalled one ran step b again when its loop came back). Here the stall
      // is a wait inside the body, the first time only, and the instance's renewals wait with it.
      const store = await apps.store();
      const ran: string[] = [];
      const stall = gate();
      let stalls = 1;
      const stepper = flow("late.between", {
        durable: true,
        do: async (_: unknown, fx) => {
          await fx.step("a", () => ran.push("a"));
          if (stalls-- > 0) await stall.promise;
          await fx.step("b", () => ran.push("b"));
          return "done";
        },
      });
      const renewals = gate();
      const time = createTimeTravel(T0);
      const a = await apps.make([{ stepper }], { store: heldRenewals(store, renewals.promise), time });
      const invoked = a.invoke(stepper, {}).then(
        () => "returned",
        (e: unknown) => e,
      );
      await until(async () => (await store.listRuns({})).length === 1, "the run stored");
      const [run] = await store.listRuns({});
      await until(async () => (await store.getJournal(run!.id)).length === 1, "step a journaled");
      const held = (await store.getRun(run!.id))!;
      // Past the lease the append renewed, a second instance takes the run and completes it.
      time.set(held.leaseExpiresAt! + 1);
      const b = await apps.make([{ stepper }], { store, time });
      await until(async () => (await store.getRun(run!.id))?.status === "completed", "completed elsewhere");
      await b.idle();
      expect(ran).toEqual(["a", "b"]);
      // The stalled instance comes back: its lease is confirmed before step b, and it was taken.
      stall.open();
      renewals.open();
      expect(await invoked).toBeInstanceOf(JournalLeaseBusy);
      await a.idle();
      expect(ran).toEqual(["a", "b"]);
    });

    it("runs its flow as usual when the lapsed lease is still its own", async () => {
      const store = await apps.store();
      const ran: string[] = [];
      const stepper = flow("late.start.own", {
        durable: true,
        do: async (_: unknown, fx) => {
          await fx.step("a", () => ran.push("a"));
          return "done";
        },
      });
      const answer = gate();
      const time = createTimeTravel(T0);
      const a = await apps.make([{ stepper }], { store: slowStarts(store, answer.promise), time });
      const invoked = a.invoke(stepper, {});
      await until(async () => (await store.listRuns({})).length === 1, "the run stored");
      const [run] = await store.listRuns({});
      time.set(run!.leaseExpiresAt! + 1);
      answer.open();
      expect(await invoked).toBe("done");
      expect(ran).toEqual(["a"]);
      expect(await store.getRun(run!.id)).toMatchObject({ status: "completed", recoveries: 0 });
    });
  });
}
