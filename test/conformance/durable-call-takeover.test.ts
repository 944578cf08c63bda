// A durable parent whose process died inside fx.call of a durable child: after a restart the parent waits for the child its boot resumed (here or elsewhere) — one recovery each, the child's step once.
import { describe, expect, it } from "vitest";
import { createTimeTravel, flow, type TimeTravel } from "../../src/index.ts";
import type { OkeConfig } from "../../src/app/config.ts";
import type { Store } from "../../src/store/types.ts";
import { appFactory, gate, until, type TestApp } from "./app-fixture.ts";
import { drivers } from "./drivers.ts";

const T0 = 1_000_000;
const LEASE_MS = 30_000;
/** Boot time of the instances after the crash: the dead instance's leases (from T0) lapsed. */
const T1 = T0 + 4 * LEASE_MS;
/** maxRecoveries 1: one crash costs each run one recovery, which the bound allows. */
const config: OkeConfig = { durable: { leaseMs: LEASE_MS, maxRecoveries: 1 } };

/**
 * parent: calls child, journals its result in a step, returns it. child: one step "work" whose n-th
 * run returns `work-n`; a run whose number is in `hold` waits for that gate (its process "dies" there).
 */
function flows() {
  const holds = new Map<number, ReturnType<typeof gate>>();
  const ran = { work: 0 };
  const child = flow("calls.child", {
    durable: true,
    do: async (_: unknown, fx) =>
      fx.step("work", async () => {
        const n = ++ran.work;
        await holds.get(n)?.promise;
        return `work-${n}`;
      }),
  });
  const parent = flow("calls.parent", {
    durable: true,
    do: async (_: unknown, fx) => {
      const got = await fx.call(child, {});
      await fx.step("after", () => got);
      return got;
    },
  });
  const hold = (n: number) => {
    const g = gate();
    holds.set(n, g);
    return g;
  };
  return { parent, child, ran, hold };
}

describe.each(drivers.filter((d) => d.name !== "file"))(
  "fx.call after a crash, on the $name driver",
  (driver) => {
    const apps = appFactory(driver);

    /**
     * An instance at T0 starts the parent, which calls the child; the child's step hangs (first run):
     * the instance is then left for dead — never stopped, its clock never moves, so it never renews.
     */
    async function crashInsideCall(store: Store, f: ReturnType<typeof flows>, cfg = config) {
      const stuck = f.hold(1);
      const dead = await apps.make([{ parent: f.parent, child: f.child }], {
        store,
        time: createTimeTravel(T0),
        config: cfg,
      });
      const invoked = dead.invoke(f.parent, {}).then(
        (v) => ({ v }),
        (e: unknown) => ({ e }),
      );
      await until(() => f.ran.work === 1, "the child's step runs in the first instance");
      const [run] = await store.listRuns({ flow: "calls.parent" });
      const parentId = run!.id;
      const childId = `${parentId}.0`;
      expect((await store.getRun(childId))?.status).toBe("running");
      /** Lets the dead instance's hung step go: its writes are fenced off (its leases were taken). */
      const release = async () => {
        stuck.open();
        return invoked;
      };
      return { dead, parentId, childId, release };
    }

    const ended = async (store: Store, id: string) => {
      const s = (await store.getRun(id))?.status;
      return s === "completed" || s === "failed";
    };
    // A parent waiting on a child held elsewhere looks again every third of a lease (its clock's).
    const advanceUntilEnded = (store: Store, time: TimeTravel, id: string) =>
      until(async () => {
        if (await ended(store, id)) return true;
        time.advance(1_000);
        return false;
      }, "the parent ends");

    it("the boot's orphan scan resumes parent and child: the parent waits for the child it holds, one recovery each, maxRecoveries 1 holds, no lease lost", async () => {
      const store = await apps.store();
      await store.open();
      const f = flows();
      const { parentId, childId, release } = await crashInsideCall(store, f);
      const time = createTimeTravel(T1);
      const app = await apps.make([{ parent: f.parent, child: f.child }], { store, time, config });
      // No time passes: the parent must not wait for any lease.
      await app.idle();
      expect(await store.getRun(parentId)).toMatchObject({
        status: "completed",
        output: "work-2",
        recoveries: 1,
        leaseOwner: null,
      });
      expect(await store.getRun(childId)).toMatchObject({
        status: "completed",
        output: "work-2",
        recoveries: 1,
      });
      expect(f.ran.work).toBe(2);
      // A lease later nothing changes (no second takeover of the parent).
      time.advance(2 * LEASE_MS);
      await app.idle();
      expect(await store.getRun(parentId)).toMatchObject({ status: "completed", recoveries: 1 });
      // The dead instance's step finishing late journals nothing: its lease is gone.
      const late = await release();
      expect(late).toHaveProperty("e");
      expect(f.ran.work).toBe(2);
      expect((await store.getJournal(childId)).filter((e) => e.kind === "step")).toHaveLength(1);
    });

    /** A second instance that has only the child flow: its orphan scan takes the child, not the parent. */
    async function childElsewhere(store: Store, f: ReturnType<typeof flows>, cfg = config) {
      return apps.make([{ child: f.child }], { store, time: createTimeTravel(T1), config: cfg });
    }

    it("the child runs under another live instance: the parent waits for it without failing its attempt, then takes its result", async () => {
      const store = await apps.store();
      await store.open();
      const f = flows();
      const { parentId, childId, release } = await crashInsideCall(store, f);
      const held = f.hold(2);
      const other = await childElsewhere(store, f);
      await until(() => f.ran.work === 2, "the other instance runs the child's step");
      const time = createTimeTravel(T1);
      const app = await apps.make([{ parent: f.parent, child: f.child }], { store, time, config });
      // The parent replays to the call and waits; its own lease stays live (heartbeats on its clock).
      await until(async () => (await store.getRun(parentId))?.recoveries === 1, "the parent taken over");
      time.advance(LEASE_MS / 2);
      held.open();
      await until(async () => (await store.getRun(childId))?.status === "completed", "the child completes");
      // The parent notices the child's end on its next look (every third of a lease), still in its
      // first attempt: a parent whose attempt had ended would be taken over again after its lease.
      await advanceUntilEnded(store, time, parentId);
      expect(await store.getRun(parentId)).toMatchObject({
        status: "completed",
        output: "work-2",
        recoveries: 1,
      });
      expect(await store.getRun(childId)).toMatchObject({
        status: "completed",
        output: "work-2",
        recoveries: 1,
      });
      expect(f.ran.work).toBe(2);
      await other.idle();
      await app.idle();
      await release();
      expect(f.ran.work).toBe(2);
    });

    it("the child's other holder dies too: once its lease lapses the waiting parent's instance takes the child over and the parent completes", async () => {
      const store = await apps.store();
      await store.open();
      const f = flows();
      // The child dies twice (two recoveries): the bound allows it, and the parent's count stays 1.
      const cfg: OkeConfig = { durable: { leaseMs: LEASE_MS, maxRecoveries: 2 } };
      const { parentId, childId, release } = await crashInsideCall(store, f, cfg);
      const stuckAgain = f.hold(2);
      await childElsewhere(store, f, cfg);
      await until(() => f.ran.work === 2, "the other instance runs the child's step");
      // That instance dies in the step too (its clock never moves again).
      const time = createTimeTravel(T1);
      const app: TestApp = await apps.make([{ parent: f.parent, child: f.child }], {
        store,
        time,
        config: cfg,
      });
      await until(async () => (await store.getRun(parentId))?.recoveries === 1, "the parent taken over");
      await advanceUntilEnded(store, time, parentId);
      expect(await store.getRun(parentId)).toMatchObject({
        status: "completed",
        output: "work-3",
        recoveries: 1,
      });
      expect(await store.getRun(childId)).toMatchObject({
        status: "completed",
        output: "work-3",
        recoveries: 2,
      });
      expect(f.ran.work).toBe(3);
      await app.idle();
      stuckAgain.open();
      await release();
      expect(f.ran.work).toBe(3);
      expect((await store.getJournal(childId)).filter((e) => e.kind === "step")).toHaveLength(1);
    });
  },
);
