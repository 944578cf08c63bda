// app.stop() waits for every task it started (once and broadcast handlers, durable resumes) up to its deadline, and logs what it left with ids.
import { describe, expect, it } from "vitest";
import { flow, on, signal } from "../../src/index.ts";
import { appFactory, gate, recordingLogger, until } from "./app-fixture.ts";
import { drivers } from "./drivers.ts";

/** Lets timers and I/O run a while: a stop that does not wait would have resolved by then. */
const turns = async (n = 20) => {
  for (let i = 0; i < n; i++) await new Promise((r) => setTimeout(r, 1));
};

describe.each(drivers.filter((d) => d.name !== "file"))("app.stop() on the $name driver", (driver) => {
  const apps = appFactory(driver);

  /** A once handler, a broadcast handler and a durable step, each held by its own gate. */
  function heldWork() {
    const gates = { once: gate(), copy: gate(), step: gate() };
    const entered = new Set<string>();
    const task = signal.once("stop.task");
    const worker = on(
      task,
      flow("stop.worker", {
        do: async () => {
          entered.add("once");
          await gates.once.promise;
        },
      }),
    );
    const news = signal.broadcast("stop.news");
    const reader = on(
      news,
      flow("stop.reader", {
        do: async () => {
          entered.add("copy");
          await gates.copy.promise;
        },
      }),
    );
    const napper = flow("stop.napper", {
      durable: true,
      do: async (_: unknown, fx) => {
        await fx.clock.sleep("nap", "1h");
        await fx.step("held", async () => {
          entered.add("step");
          await gates.step.promise;
        });
      },
    });
    return { gates, entered, modules: [{ task, worker, news, reader, napper }], task, news };
  }

  /** Boots the app and gets all three going; the durable one resumed by wake early (not by a scheduler). */
  async function startAll(h: ReturnType<typeof heldWork>) {
    const { logger, records } = recordingLogger();
    const app = await apps.make(h.modules, { logger });
    await app.invoke("stop.napper", {});
    const [run] = await app.operator.runs({ flow: "stop.napper" });
    await app.emit(h.task, undefined, { id: "task-1" });
    await app.emit(h.news, undefined);
    expect(await app.wakeEarly(run!.id)).toEqual({ outcome: "resumed", runId: run!.id });
    await until(() => h.entered.size === 3, "all three running");
    return { app, records, runId: run!.id };
  }

  it("waits for handlers and a resume until each finishes; then nothing is left", async () => {
    const h = heldWork();
    const { app, records, runId } = await startAll(h);
    let stopped = false;
    const stopping = app.stop({ timeoutMs: 60_000 }).then(() => (stopped = true));
    await turns();
    expect(stopped).toBe(false);
    h.gates.once.open();
    h.gates.copy.open();
    await turns();
    // The handlers are done; the resume wake early started still runs: stop() still waits for it.
    expect(stopped).toBe(false);
    h.gates.step.open();
    await stopping;
    expect((await app.store.getRun(runId))?.status).toBe("completed");
    expect((await app.store.getMessage("task-1"))?.status).toBe("delivered");
    expect(records.at(-1)).toMatchObject({
      msg: "okengine stopped: nothing left running",
      leftForReclaim: 0,
    });
  });

  it("at its deadline it returns and logs what it left: counts and ids", async () => {
    const h = heldWork();
    const { app, records, runId } = await startAll(h);
    await app.stop({ timeoutMs: 50 });
    const last = records.at(-1)!;
    expect(last).toMatchObject({
      level: 40,
      leftForReclaim: 1,
      durableRunsLeft: 1,
      messageIds: ["task-1"],
      runIds: [runId],
    });
    expect(last.broadcastIds).toEqual([expect.stringMatching(/\/stop\.reader$/)]);
    expect(last.msg).toContain("1 message handler(s) were still running");
    expect(last.msg).toContain("1 durable run(s) were still running");
    expect(last.msg).toContain("1 broadcast handler(s) were still running");
    h.gates.once.open();
    h.gates.copy.open();
    h.gates.step.open();
  });
});
