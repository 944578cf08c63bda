// A durable consumer's step failing after the wake is retried like one before its park: message back to pending, then dead on the last attempt; on every driver.
import { describe, expect, it } from "vitest";
import { flow, on, signal } from "../../src/index.ts";
import { entryName } from "../../src/store/types.ts";
import { appFactory } from "./app-fixture.ts";
import { drivers } from "./drivers.ts";

const SIGNAL = "flaky.go";

/** The audit's consumer: a step, a 5 s nap, then `boom`, which fails `failing()` says so. */
function flaky(failing: () => boolean) {
  const ran = { one: 0, boom: 0, undo: 0 };
  /** fx.attempt at each run of `boom`: the attempt that parked goes on after the wake. */
  const attempts: number[] = [];
  const go = signal.once(SIGNAL, { retries: 2 });
  const worker = on(
    go,
    flow("workers.flaky", {
      durable: true,
      do: async (_: { n: number }, fx) => {
        await fx.step("one", () => (ran.one++, "1"), { undo: () => void ran.undo++ });
        await fx.clock.sleep("nap", "5s");
        await fx.step("boom", () => {
          ran.boom++;
          attempts.push(fx.attempt);
          if (failing()) throw new Error("upstream 503");
          return "ok";
        });
        return "done";
      },
    }),
  );
  return { go, worker, ran, attempts };
}

describe.each(drivers)("a durable consumer's failure after its wake, on the $name driver", (driver) => {
  const apps = appFactory(driver);

  it("fails twice after the wake, then succeeds: retried through the queue, the run completes, its message delivered on attempt 3", async () => {
    let failures = 2;
    const { go, worker, ran, attempts } = flaky(() => failures-- > 0);
    const app = await apps.make([{ worker }]);
    const id = "m-flaky-1";
    await app.emit(go, { n: 1 }, { id });
    await app.idle();
    expect(await app.store.getRun(id)).toMatchObject({ status: "sleeping" });
    expect(await app.store.getMessage(id)).toMatchObject({ status: "delivered", attempts: 1 });

    app.time.advance("5s");
    await app.idle();
    expect(await app.store.getRun(id)).toMatchObject({ status: "completed", output: "done" });
    const m = await app.store.getMessage(id);
    expect(m).toMatchObject({ status: "delivered", attempts: 3 });
    expect(m?.failures.map((f) => [f.attempt, f.message])).toEqual([
      [1, "upstream 503"],
      [2, "upstream 503"],
    ]);
    // `one` replayed from the journal each time; only `boom` ran again; no failure was journaled.
    expect(ran).toEqual({ one: 1, boom: 3, undo: 0 });
    expect(attempts).toEqual([1, 2, 3]);
    expect((await app.store.getJournal(id)).map((e) => [entryName(e), e.error?.message])).toEqual([
      ["one", undefined],
      ["nap", undefined],
      ["boom", undefined],
    ]);
    expect(await app.deadLetters(go)).toEqual([]);
  });

  it("fails on every attempt: the run fails after its undo, the message is a dead letter, and a replay runs it afresh as <id>.r1", async () => {
    let healthy = false;
    const { go, worker, ran } = flaky(() => !healthy);
    const app = await apps.make([{ worker }]);
    const id = "m-flaky-2";
    await app.emit(go, { n: 2 }, { id });
    await app.idle();
    app.time.advance("5s");
    await app.idle();
    expect(await app.store.getRun(id)).toMatchObject({
      status: "failed",
      error: { message: "upstream 503" },
    });
    const m = await app.store.getMessage(id);
    expect(m).toMatchObject({ status: "dead", attempts: 3 });
    expect(m?.failures.map((f) => f.attempt)).toEqual([1, 2, 3]);
    expect(ran).toEqual({ one: 1, boom: 3, undo: 1 });
    expect((await app.deadLetters(go)).map((d) => d.id)).toEqual([id]);

    healthy = true;
    expect(await app.operator.replay(SIGNAL, [id])).toEqual([id]);
    await app.idle();
    expect(await app.store.getRun(`${id}.r1`)).toMatchObject({ status: "sleeping" });
    app.time.advance("5s");
    await app.idle();
    expect(await app.store.getRun(`${id}.r1`)).toMatchObject({ status: "completed", output: "done" });
    expect(await app.store.getMessage(id)).toMatchObject({ status: "delivered", replays: 1 });
    expect(await app.store.getRun(id)).toMatchObject({ status: "failed" });
    expect(ran).toEqual({ one: 2, boom: 4, undo: 1 });
  });

  it("parked on its last attempt: a failure after the wake is final at once", async () => {
    let notYet = 2;
    let booms = 0;
    const late = signal.once("flaky.late", { retries: 2 });
    // `one` fails on the first two deliveries, so the run parks on attempt 3 of 3.
    const worker = on(
      late,
      flow("workers.late", {
        durable: true,
        do: async (_: unknown, fx) => {
          await fx.step("one", () => {
            if (notYet-- > 0) throw new Error("not yet");
          });
          await fx.clock.sleep("nap", "5s");
          await fx.step("boom", () => {
            booms++;
            throw new Error("upstream 503");
          });
        },
      }),
    );
    const app = await apps.make([{ worker }]);
    const id = "m-late-1";
    await app.emit(late, {}, { id });
    await app.idle();
    expect(await app.store.getMessage(id)).toMatchObject({ status: "delivered", attempts: 3 });
    app.time.advance("5s");
    await app.idle();
    expect(await app.store.getRun(id)).toMatchObject({ status: "failed" });
    const m = await app.store.getMessage(id);
    expect(m).toMatchObject({ status: "dead", attempts: 3 });
    expect(m?.failures.map((f) => [f.attempt, f.message])).toEqual([
      [1, "not yet"],
      [2, "not yet"],
      [3, "upstream 503"],
    ]);
    expect(booms).toBe(1);
  });
});
