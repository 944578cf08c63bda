// durable.concurrency bounds resumes: 60 sleepers due at once, and boot orphans, never run more bodies at once than it allows.
import { describe, expect, it } from "vitest";
import { createTimeTravel, flow, http, on } from "../../src/index.ts";
import { appFactory, gate, until } from "./app-fixture.ts";
import { drivers } from "./drivers.ts";

const post = { method: "POST", headers: { "content-type": "application/json" }, body: "{}" };
const T0 = 1_000_000;

/** Bodies that hold inside a step until the test opens the current gate, counting how many run at once. */
function heldBodies() {
  const s = { running: 0, max: 0, done: 0, hold: gate() };
  const work = async (): Promise<void> => {
    s.running++;
    s.max = Math.max(s.max, s.running);
    const g = s.hold;
    await g.promise;
    s.running--;
    s.done++;
  };
  /** Lets the bodies through `limit` at a time until `total` are done; checks the store never holds more. */
  const drain = async (total: number, limit: number, runningInStore: () => Promise<number>) => {
    while (s.done < total) {
      await until(() => s.running === Math.min(limit, total - s.done), "a full set of bodies running");
      // The store agrees: no run is claimed beyond the permits (a claim would flip it to running).
      expect(await runningInStore()).toBeLessThanOrEqual(limit);
      const g = s.hold;
      s.hold = gate();
      g.open();
      await until(() => s.running === 0 || s.hold !== g, "the set let through");
    }
  };
  return { s, work, drain };
}

describe.each(drivers.filter((d) => d.name !== "file"))(
  "durable.concurrency on the $name driver",
  (driver) => {
    const apps = appFactory(driver);

    it("60 sleepers due at once with concurrency 5: at most 5 bodies run at a time, all 60 complete", async () => {
      const { s, work, drain } = heldBodies();
      const f = on(
        http.post("/nap"),
        flow("naps.nap", {
          durable: true,
          do: async (_: unknown, fx) => {
            await fx.clock.sleep("nap", "1h");
            await fx.step("work", work);
          },
        }),
      );
      const app = await apps.make([{ f }], { config: { durable: { concurrency: 5 } } });
      for (let i = 0; i < 60; i++) await app.request("/nap", post);
      expect(await app.operator.sleepers()).toHaveLength(60);
      app.time.advance("1h");
      await drain(60, 5, async () => (await app.operator.runs({ status: "running" })).length);
      await until(
        async () => (await app.operator.runs({ status: "completed" })).length === 60,
        "all complete",
      );
      expect(s.max).toBeLessThanOrEqual(5);
      expect(s.max).toBe(5);
    });

    it("boot orphans beyond the limit wait for permits; boot does not wait for them", async () => {
      const { s, work, drain } = heldBodies();
      const f = on(
        http.post("/w"),
        flow("orphans.work", {
          durable: true,
          do: async (_: unknown, fx) => {
            await fx.step("work", work);
          },
        }),
      );
      const store = await apps.store();
      await store.open();
      // Twelve runs of an instance that died mid-run: their leases lapsed long ago.
      for (let i = 0; i < 12; i++)
        await store.startRun({
          id: `orphan-${i}`,
          flow: "orphans.work",
          input: {},
          parentRunId: null,
          owner: "dead/1",
          now: T0,
          leaseMs: 1_000,
        });
      const app = await apps.make([{ f }], {
        store,
        time: createTimeTravel(T0 + 60_000),
        config: { durable: { concurrency: 2 } },
      });
      // Booted (ready) while every permit is held by a body that has not finished.
      expect(s.done).toBe(0);
      // Unclaimed orphans are `running` too, under the dead owner's lapsed lease: count only this app's.
      const claimed = async () =>
        (await app.operator.runs({ status: "running" })).filter((r) => r.leaseOwner !== "dead/1").length;
      await drain(12, 2, claimed);
      await until(
        async () => (await app.operator.runs({ status: "completed" })).length === 12,
        "all complete",
      );
      expect(s.max).toBe(2);
    });
  },
);
