// A redelivery that finds its run taken over by this same instance (after a crash) settles with that attempt, spending no extra attempt; on every driver.
import { describe, expect, it } from "vitest";
import { flow, on, signal } from "../../src/index.ts";
import { createTimeTravel } from "../../src/clock/time-travel.ts";
import { appFactory, gate, recordingLogger, until } from "./app-fixture.ts";
import { drivers } from "./drivers.ts";

const SIGNAL = "jobs.crashed";
const T = 1_000_000;
const LEASE = 30_000;

describe.each(drivers)(
  "a redelivery to the instance that took its run over, on the $name driver",
  (driver) => {
    const apps = appFactory(driver);

    it("waits for the orphan scan's attempt and settles with it: delivered on attempt 2, not left to its lease", async () => {
      const id = "m-crashed-1";
      const store = await apps.store();
      await store.open();
      // What a SIGKILL mid-step leaves: the message claimed (attempt 1) and its run held, both leases live.
      await store.enqueue([{ id, signal: SIGNAL, key: null, payload: { n: 1 }, parentRunId: null }], T);
      expect(
        await store.claim({ signal: SIGNAL, worker: "dead-pool", max: 1, now: T, leaseMs: LEASE }),
      ).toHaveLength(1);
      await store.startRun({
        id,
        flow: SIGNAL,
        input: { n: 1 },
        parentRunId: null,
        owner: "dead/1",
        now: T,
        leaseMs: LEASE,
      });

      const release = gate();
      let worked = 0;
      const jobs = signal.once(SIGNAL, { retries: 3 });
      const w = on(
        jobs,
        flow(SIGNAL, {
          durable: true,
          do: async (_: { n: number }, fx) => {
            await fx.step("work", async () => {
              worked++;
              await release.promise;
            });
            return "done";
          },
        }),
      );
      const { logger, records } = recordingLogger();
      // Restarted after both leases lapsed: the boot's orphan scan takes the run, then the pool claims the message.
      const app = await apps.make([{ w }], { store, time: createTimeTravel(T + LEASE + 1_000), logger });
      // The redelivery (attempt 2) found the run held: it waits for that attempt (before: left to its lease).
      const said = (text: string) => records.some((r) => String(r.msg).includes(text));
      await until(
        () => said("waiting for it to end") || said("left to its lease"),
        "the redelivery to find its run held",
      );
      release.open();
      await app.idle();

      expect(await store.getRun(id)).toMatchObject({ status: "completed", output: "done", recoveries: 1 });
      expect(await store.getMessage(id)).toMatchObject({ status: "delivered", attempts: 2, failures: [] });
      expect(worked).toBe(1);
      expect(records.filter((r) => String(r.msg).includes("left to its lease"))).toEqual([]);
    });
  },
);
