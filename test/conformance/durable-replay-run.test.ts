// Replaying a dead letter whose durable consumer's run failed starts a fresh run (`<id>.r<n>`); the failed run stays.
import { describe, expect, it } from "vitest";
import { flow, on, signal } from "../../src/index.ts";
import { entryName } from "../../src/store/types.ts";
import { appFactory } from "./app-fixture.ts";
import { drivers } from "./drivers.ts";

const SIGNAL = "jobs.replayed";

describe.each(drivers)("replaying a durable consumer's dead letter, on the $name driver", (driver) => {
  const apps = appFactory(driver);

  it("a replay runs the handler again as a new run; the failed run stays failed; replaying a delivered message changes nothing", async () => {
    let healthy = false;
    const ran = { charge: 0, ship: 0, undo: 0 };
    const jobs = signal.once(SIGNAL, { retries: 0 });
    const w = on(
      jobs,
      flow(SIGNAL, {
        durable: true,
        do: async (_: { n: number }, fx) => {
          await fx.step("charge", () => (ran.charge++, "c1"), { undo: () => void ran.undo++ });
          await fx.step("ship", () => {
            ran.ship++;
            if (!healthy) throw new Error("carrier down");
            return "s1";
          });
          return "shipped";
        },
      }),
    );
    const app = await apps.make([{ w }]);
    const id = "m-replayed-1";
    await app.emit(jobs, { n: 1 }, { id });
    await app.idle();
    expect(await app.store.getMessage(id)).toMatchObject({
      status: "dead",
      failures: [{ message: "carrier down" }],
    });
    expect(await app.store.getRun(id)).toMatchObject({
      status: "failed",
      error: { message: "carrier down" },
    });
    expect(ran).toEqual({ charge: 1, ship: 1, undo: 1 });

    healthy = true;
    expect(await app.operator.replay(SIGNAL, [id])).toEqual([id]);
    await app.idle();
    const m = await app.store.getMessage(id);
    expect(m).toMatchObject({ status: "delivered", replays: 1 });
    // The handler ran again from the top: a fresh journal, not the failed one replayed.
    expect(ran).toEqual({ charge: 2, ship: 2, undo: 1 });
    const fresh = await app.store.getRun(`${id}.r1`);
    expect(fresh).toMatchObject({ status: "completed", output: "shipped", flow: SIGNAL });
    expect((await app.store.getJournal(`${id}.r1`)).map(entryName)).toEqual(["charge", "ship"]);
    // The failed run is kept for inspection, as it was.
    expect(await app.store.getRun(id)).toMatchObject({
      status: "failed",
      error: { message: "carrier down" },
    });
    expect((await app.store.listRuns({ status: "failed", flow: SIGNAL })).map((r) => r.id)).toEqual([id]);
    expect((await app.store.listRuns({ status: "completed", flow: SIGNAL })).map((r) => r.id)).toEqual([
      `${id}.r1`,
    ]);

    // Delivered: not a dead letter any more, so a second replay skips it and starts nothing.
    expect(await app.operator.replay(SIGNAL, [id])).toEqual([]);
    await app.idle();
    expect(ran).toEqual({ charge: 2, ship: 2, undo: 1 });
    expect(await app.store.getMessage(id)).toMatchObject({ status: "delivered", replays: 1 });
    expect(await app.store.getRun(`${id}.r2`)).toBeUndefined();
  });

  it("a replayed run that fails again is kept too, and the next replay runs as .r2", async () => {
    let failures = 2;
    let ships = 0;
    const jobs = signal.once(SIGNAL, { retries: 0 });
    const w = on(
      jobs,
      flow(SIGNAL, {
        durable: true,
        do: async (_: { n: number }, fx) =>
          fx.step("ship", () => {
            ships++;
            if (failures-- > 0) throw new Error("carrier down");
            return "s1";
          }),
      }),
    );
    const app = await apps.make([{ w }]);
    const id = "m-replayed-1";
    await app.emit(jobs, { n: 1 }, { id });
    await app.idle();
    expect(await app.operator.replay(SIGNAL, [id])).toEqual([id]);
    await app.idle();
    expect(await app.store.getMessage(id)).toMatchObject({ status: "dead", replays: 1 });
    expect(await app.store.getRun(`${id}.r1`)).toMatchObject({ status: "failed" });
    expect(await app.operator.replay(SIGNAL, [id])).toEqual([id]);
    await app.idle();
    expect(await app.store.getMessage(id)).toMatchObject({ status: "delivered", replays: 2 });
    expect(ships).toBe(3);
    expect(await app.store.getRun(id)).toMatchObject({ status: "failed" });
    expect(await app.store.getRun(`${id}.r1`)).toMatchObject({ status: "failed" });
    expect(await app.store.getRun(`${id}.r2`)).toMatchObject({ status: "completed", output: "s1" });
  });
});
