/** Poison messages on every driver: a handler that hangs past its lease runs `retries + 1` times, then dead-letters. */
import { describe, expect, it } from "vitest";
import { flow, on, signal } from "../../src/index.ts";
import { appFactory, gate, until } from "./app-fixture.ts";
import { drivers } from "./drivers.ts";

describe.each(drivers)("poison messages on the $name driver", (driver) => {
  const apps = appFactory(driver);

  it("a handler that never finishes runs retries + 1 times, ends dead with LEASE_EXPIRED, and its key moves on", async () => {
    const task = signal.once("jobs.poison", { retries: 2 });
    const hang = gate();
    const runs: Array<{ n: number; attempt: number }> = [];
    const w = on(
      task,
      flow("jobs.poison", {
        do: async ({ n }: { n: number }, fx) => {
          runs.push({ n, attempt: fx.attempt });
          if (n === 1) await hang.promise;
        },
      }),
    );
    const app = await apps.make([{ w }], { config: { signals: { leaseMs: 1_000 } } });
    await app.emit(task, { n: 1 }, { key: "k" });
    await app.emit(task, { n: 2 }, { key: "k" });
    for (let attempt = 1; attempt <= 3; attempt++) {
      await until(() => runs.length === attempt, `attempt ${attempt}`);
      app.time.advance("1s"); // the lease runs out; the next claim takes the message again
    }
    await until(async () => (await app.operator.stats("jobs.poison")).delivered === 1, "the successor ran");
    expect(runs).toEqual([
      { n: 1, attempt: 1 },
      { n: 1, attempt: 2 },
      { n: 1, attempt: 3 },
      { n: 2, attempt: 1 },
    ]);
    const [dead] = await app.operator.deadLetters("jobs.poison");
    expect(dead).toMatchObject({ status: "dead", payload: { n: 1 }, attempts: 4 });
    expect(dead!.failures).toEqual([
      {
        code: "LEASE_EXPIRED",
        message:
          'attempt 3 of "jobs.poison" did not finish within its lease: its handler ran past the lease (slow or hung), crashed, or lost its process, and all 3 attempts are spent',
        at: app.time.now(),
        attempt: 3,
      },
    ]);
    hang.open(); // the hung attempts finish late: fenced, the message stays dead
    await app.idle();
    expect(await app.operator.stats("jobs.poison")).toMatchObject({
      dead: 1,
      delivered: 1,
      inflight: 0,
      pending: 0,
    });
  });

  it("with deadLetter: false the spent message is marked delivered and the dead letters stay empty", async () => {
    const task = signal.once("jobs.poison", { retries: 0, deadLetter: false });
    const hang = gate();
    let runs = 0;
    const w = on(
      task,
      flow("jobs.poison", {
        do: async () => {
          runs++;
          await hang.promise;
        },
      }),
    );
    const app = await apps.make([{ w }], { config: { signals: { leaseMs: 1_000 } } });
    await app.emit(task, {});
    await until(() => runs === 1, "first attempt");
    app.time.advance("1s");
    await until(
      async () => (await app.operator.stats("jobs.poison")).delivered === 1,
      "settled without a run",
    );
    expect(runs).toBe(1);
    expect(await app.operator.deadLetters("jobs.poison")).toEqual([]);
    hang.open();
    await app.idle();
  });
});
