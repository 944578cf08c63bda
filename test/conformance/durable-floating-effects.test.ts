// A durable body that does not await an fx call before it sleeps or returns: the call is journaled first (once, not lost, not run again after the wake), the process survives, one warning names it.
import { describe, expect, it } from "vitest";
import { flow } from "../../src/index.ts";
import { createTimeTravel } from "../../src/clock/time-travel.ts";
import { entryName } from "../../src/store/types.ts";
import { appFactory, recordingLogger, until, type TestApp } from "./app-fixture.ts";
import { drivers } from "./drivers.ts";

const T0 = 1_000_000;
const DAY = 86_400_000;

describe.each(drivers)("fx calls left floating in a durable body on the $name driver", (driver) => {
  const apps = appFactory(driver);
  /** The one run of `flow` (each test starts one). */
  const runOf = async (app: TestApp, flowName: string): Promise<string> => {
    const runs = await app.store.listRuns({ flow: flowName });
    expect(runs).toHaveLength(1);
    return runs[0]!.id;
  };
  const warnings = (records: Array<Record<string, unknown>>) =>
    records.filter((r) => r.level === 40 && String(r.msg).startsWith("durable run:"));

  it("a step not awaited before a sleep is journaled before the run parks, and runs once across the wake", async () => {
    const ran = { start: 0, after: 0 };
    const trial = flow("floating.trial", {
      durable: true,
      do: async (_: unknown, fx) => {
        // The audit's mistake: no await. The park used to take the lease from under its write.
        void fx.step("start-trial", async () => {
          ran.start++;
          await new Promise((r) => setImmediate(r));
          return "started";
        });
        await fx.clock.sleep("trial-end", "3d");
        await fx.step("after", () => ++ran.after);
      },
    });
    const { logger, records } = recordingLogger();
    const time = createTimeTravel(T0);
    const app = await apps.make([{ trial }], { time, logger });
    expect(await app.invoke(trial, {})).toBeUndefined();
    const id = await runOf(app, "floating.trial");
    expect(await app.store.getRun(id)).toMatchObject({ status: "sleeping" });
    const journal = await app.store.getJournal(id);
    expect(journal.map((e) => `${e.seq}:${e.kind}:${entryName(e)}`)).toEqual([
      "0:step:start-trial",
      "1:sleep:trial-end",
    ]);
    expect(journal[0]).toMatchObject({ value: "started" });
    expect(warnings(records)).toEqual([
      expect.objectContaining({
        runId: id,
        effects: ['fx.step("start-trial")'],
        msg: 'durable run: fx.clock.sleep("trial-end") came while fx.step("start-trial") still ran; waiting for it to be journaled first — await every fx call before the next',
      }),
    ]);
    time.advance(3 * DAY);
    await until(async () => (await app.store.getRun(id))?.status === "completed", "the run completes");
    expect(ran).toEqual({ start: 1, after: 1 });
  });

  it("a step not awaited before the body returns is journaled before the run completes", async () => {
    let ran = 0;
    const quick = flow("floating.return", {
      durable: true,
      do: async (_: unknown, fx) => {
        void fx.step("log-it", async () => {
          ran++;
          await new Promise((r) => setImmediate(r));
          return ran;
        });
        return "done";
      },
    });
    const { logger, records } = recordingLogger();
    const app = await apps.make([{ quick }], { time: createTimeTravel(T0), logger });
    expect(await app.invoke(quick, {})).toBe("done");
    const id = await runOf(app, "floating.return");
    expect(await app.store.getRun(id)).toMatchObject({ status: "completed", output: "done" });
    expect((await app.store.getJournal(id)).map((e) => [e.kind, entryName(e), e.value])).toEqual([
      ["step", "log-it", 1],
    ]);
    expect(ran).toBe(1);
    expect(warnings(records).map((r) => r.msg)).toEqual([
      `durable run: the flow's return came while fx.step("log-it") still ran; waiting for it to be journaled first — await every fx call before the next`,
    ]);
  });

  it("steps awaited together (Promise.all) before a sleep, and a sleep inside a step body, warn of nothing", async () => {
    const both = flow("floating.none", {
      durable: true,
      do: async (_: unknown, fx) => {
        await Promise.all([fx.step("a", () => 1), fx.step("b", () => 2)]);
        await fx.step("outer", async () => {
          await fx.clock.sleep("inside", "1h");
          return 3;
        });
      },
    });
    const { logger, records } = recordingLogger();
    const time = createTimeTravel(T0);
    const app = await apps.make([{ both }], { time, logger });
    expect(await app.invoke(both, {})).toBeUndefined();
    const id = await runOf(app, "floating.none");
    expect(await app.store.getRun(id)).toMatchObject({ status: "sleeping" });
    time.advance(DAY);
    await until(async () => (await app.store.getRun(id))?.status === "completed", "the run completes");
    expect(warnings(records)).toEqual([]);
  });
});
