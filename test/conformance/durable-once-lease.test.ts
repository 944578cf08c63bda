// A durable once consumer whose run another instance holds past the message's attempt budget: the message settles with its run.
import { describe, expect, it } from "vitest";
import { flow, on, signal } from "../../src/index.ts";
import { createTimeTravel } from "../../src/clock/time-travel.ts";
import { appFactory, gate, recordingLogger, until } from "./app-fixture.ts";
import { drivers } from "./drivers.ts";

describe.each(drivers)("durable once consumer, run held elsewhere, on the $name driver", (driver) => {
  const apps = appFactory(driver);

  /**
   * Two instances. The first delivery starts the run and its step takes longer than the message's
   * lease (1 s) but the run's own lease (60 s, kept alive by the heartbeat) holds. Every later claim
   * finds the run held by its first owner — JournalLeaseBusy — and leaves the message to its lease,
   * so each lease that lapses is one more attempt. Before the fix the claim past retries + 1 dead-
   * lettered the message with LEASE_EXPIRED while the run went on to complete.
   */
  async function scenario(finish: "complete" | "fail") {
    const task = signal.once("jobs.durable-lease", { retries: 1 });
    const slow = gate();
    const bodies: Array<{ runId: string; attempt: number }> = [];
    const w = on(
      task,
      flow("jobs.durable-lease", {
        durable: true,
        do: async (_input: { n: number }, fx) => {
          await fx.step("work", async () => {
            bodies.push({ runId: fx.runId, attempt: fx.attempt });
            await slow.promise;
            if (finish === "fail") throw new Error("the step failed for good");
          });
        },
      }),
    );
    const store = await apps.store();
    const time = createTimeTravel(1_000_000);
    const config = { signals: { leaseMs: 1_000 }, durable: { leaseMs: 60_000 } };
    // One recorder for both instances: either may claim a redelivery.
    const { logger, records } = recordingLogger();
    const a = await apps.make([{ w }], { store, time, config, logger });
    const b = await apps.make([{ w }], { store, time, config, logger });
    await a.emit(task, { n: 1 });
    await until(() => bodies.length === 1, "the first delivery runs the step");
    const id = bodies[0]!.runId;
    // Each claim that finds the run held reports it (the attempt it was, left to its lease).
    const reported = (attempt: number) => () =>
      records.some((r) => r.code === "JournalLeaseBusy" && r.messageId === id && r.attempt === attempt);
    // Three message leases lapse while the run's lease is live: attempts 2 and 3 find the run held.
    for (let attempt = 2; attempt <= 3; attempt++) {
      time.advance("1s");
      await until(async () => {
        const m = await store.getMessage(id);
        return m !== undefined && (m.attempts >= attempt || m.status !== "inflight");
      }, `claim ${attempt}`);
      await until(reported(attempt), `attempt ${attempt} reported as left to its lease`);
    }
    time.advance("1s");
    await until(async () => {
      const m = await store.getMessage(id);
      return m !== undefined && (m.attempts >= 4 || m.status !== "inflight");
    }, "the claim past the budget");
    await until(reported(4), "attempt 4 reported as left to its lease");
    slow.open();
    // The message settles at its next claim, once its lease lapses; a released run's last attempt runs then.
    for (let lapse = 0; ; lapse++) {
      const [run, m] = await Promise.all([store.getRun(id), store.getMessage(id)]);
      if ((run?.status === "completed" || run?.status === "failed") && m?.status !== "inflight") break;
      if (lapse > 20) throw new Error(`run ${run?.status}, message ${m?.status} after ${lapse} leases`);
      await new Promise((r) => setTimeout(r, 50));
      time.advance("1s");
    }
    await a.idle();
    await b.idle();
    return { store, id, bodies, a, records };
  }

  it("the run completes: the message is delivered, no dead letter, the step ran once", async () => {
    const { store, id, bodies, a, records } = await scenario("complete");
    // Each attempt that found the run held is reported once, naming the run, as a warning.
    const busy = records.filter((r) => r.code === "JournalLeaseBusy" && r.messageId === id);
    const attempts = busy.map((r) => r.attempt as number);
    expect(attempts).toEqual(expect.arrayContaining([2, 3, 4]));
    expect(new Set(attempts).size).toBe(attempts.length);
    for (const r of busy)
      expect(r).toMatchObject({
        level: 40,
        signal: "jobs.durable-lease",
        runId: id,
        msg: expect.stringContaining("redelivered after its lease (1 s) lapses"),
      });
    expect(await store.getRun(id)).toMatchObject({ status: "completed" });
    expect(bodies).toHaveLength(1);
    expect(await a.operator.deadLetters("jobs.durable-lease")).toEqual([]);
    expect(await store.getMessage(id)).toMatchObject({ status: "delivered" });
  });

  it("the run fails: the message is dead with the run's failure, not LEASE_EXPIRED", async () => {
    const { store, id, a } = await scenario("fail");
    expect(await store.getRun(id)).toMatchObject({ status: "failed" });
    const [dead] = await a.operator.deadLetters("jobs.durable-lease");
    expect(dead).toMatchObject({ status: "dead" });
    expect(dead!.failures.at(-1)).toMatchObject({
      message: expect.stringContaining("the step failed for good"),
    });
    expect(dead!.failures.map((f) => f.code)).not.toContain("LEASE_EXPIRED");
  });
});
