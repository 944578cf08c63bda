// Fenced journal writes survive a lost reply: append and finish are retried, and an append that committed is not written twice.
import { describe, expect, it } from "vitest";
import { flow, on, signal } from "../../src/index.ts";
import { entryName, type Store } from "../../src/store/types.ts";
import { appFactory, recordingLogger, until } from "./app-fixture.ts";
import { drivers } from "./drivers.ts";

/** `base`, except that every journal append fails as in an outage; `tries()` counts them. */
function outage(base: Store): { store: Store; tries: () => number } {
  let tries = 0;
  const store: Store = Object.create(base) as Store;
  store.append = async () => {
    tries++;
    throw new Error("connect ECONNREFUSED");
  };
  return { store, tries: () => tries };
}

describe.each(drivers)("journal writes whose reply is lost, on the $name driver", (driver) => {
  const apps = appFactory(driver);

  it("append and finish commit, the reply is lost: the run completes, each entry and each emit once", async () => {
    const base = await apps.store();
    const lost = { append: 0, finish: 0 };
    // Each write commits, then its caller sees a dropped connection instead of the reply (once per write).
    const store: Store = Object.create(base) as Store;
    store.append = async (req) => {
      await base.append(req);
      if (lost.append < 2) {
        lost.append++;
        throw new Error("Connection terminated unexpectedly");
      }
    };
    store.finish = async (req) => {
      await base.finish(req);
      if (lost.finish < 1) {
        lost.finish++;
        throw new Error("Connection terminated unexpectedly");
      }
    };
    const receipts = signal.once("retry.receipts");
    let charged = 0;
    let mailed = 0;
    const mail = on(
      receipts,
      flow("retry.mail", {
        do: () => {
          mailed++;
        },
      }),
    );
    const pay = flow("retry.pay", {
      durable: true,
      do: async (_: unknown, fx) => {
        const id = await fx.step("charge", () => ++charged);
        await fx.emit(receipts, { id });
        return { id };
      },
    });
    const { logger, records } = recordingLogger();
    const app = await apps.make([{ receipts, pay, mail }], { store, logger });
    expect(await app.invoke(pay, {})).toEqual({ id: 1 });
    expect(lost).toEqual({ append: 2, finish: 1 });
    expect(charged).toBe(1);
    const [run] = await base.listRuns({ flow: "retry.pay" });
    expect(run).toMatchObject({ status: "completed", output: { id: 1 } });
    expect((await base.getJournal(run!.id)).map((e) => [e.seq, e.kind, entryName(e)])).toEqual([
      [0, "step", "charge"],
      [1, "emit", "retry.receipts"],
    ]);
    await app.idle();
    expect(mailed).toBe(1);
    expect(await base.stats("retry.receipts", app.clock.now())).toMatchObject({ delivered: 1, pending: 0 });
    const retries = records.filter((r) => typeof r.msg === "string" && r.msg.endsWith("failed; retrying"));
    expect(retries.map((r) => r.msg)).toEqual([
      "durable run: journal append failed; retrying",
      "durable run: journal append failed; retrying",
      "durable run: finish failed; retrying",
    ]);
  });

  it("a refusal is not retried: a write fenced off by another holder fails at once", async () => {
    const base = await apps.store();
    let appends = 0;
    const store: Store = Object.create(base) as Store;
    store.append = async (req) => {
      appends++;
      // Another instance took the run over before this write.
      await base.releaseRun({ runId: req.runId, owner: req.owner, now: req.now });
      await base.acquireRun({ runId: req.runId, owner: "thief", now: req.now, leaseMs: 60_000 });
      return base.append(req);
    };
    const f = flow("retry.fenced", {
      durable: true,
      do: async (_: unknown, fx) => fx.step("one", () => 1),
    });
    const app = await apps.make([{ f }], { store });
    await expect(app.invoke(f, {})).rejects.toMatchObject({ name: "JournalLeaseBusy" });
    expect(appends).toBe(1);
  });

  it("a write still failing at the stop deadline is given up, logged, and the run left to its lease", async () => {
    const base = await apps.store();
    const { store, tries } = outage(base);
    let entered = false;
    const f = flow("retry.outage", {
      durable: true,
      do: async (_: unknown, fx) =>
        fx.step("one", () => {
          entered = true;
          return 1;
        }),
    });
    const { logger, records } = recordingLogger();
    const app = await apps.make([{ f }], { store, logger });
    const running = app.invoke(f, {}).catch((e: unknown) => e);
    while (tries() < 2) await new Promise((r) => setTimeout(r, 5));
    await app.stop({ timeoutMs: 50 });
    expect(await running).toMatchObject({ name: "JournalLeaseBusy" });
    expect(entered).toBe(true);
    const [run] = await base.listRuns({ flow: "retry.outage" });
    // Not failed: still running under its lease, so it resumes from its journal elsewhere or at the next boot.
    expect(run).toMatchObject({ status: "running" });
    expect(records.map((r) => r.msg)).toContain(
      "durable run: journal append given up (stopping); the run resumes from its journal once its lease runs out",
    );
  });

  it("many runs retrying through one outage raise no MaxListenersExceededWarning on the shared stop signal", async () => {
    const base = await apps.store();
    const { store, tries } = outage(base);
    const f = flow("retry.many", { durable: true, do: async (_: unknown, fx) => fx.step("one", () => 1) });
    const warnings: string[] = [];
    const onWarning = (w: Error): void => void warnings.push(w.name);
    process.on("warning", onWarning);
    try {
      const app = await apps.make([{ f }], { store, logger: recordingLogger().logger });
      const running = Array.from({ length: 20 }, () => app.invoke(f, {}).catch((e: unknown) => e));
      // Every run is in its retry wait at once (each first try failed, each second one too).
      while (tries() < 40) await new Promise((r) => setTimeout(r, 5));
      await app.stop({ timeoutMs: 50 });
      for (const r of await Promise.all(running)) expect(r).toMatchObject({ name: "JournalLeaseBusy" });
      // Node emits process warnings on the next tick.
      await new Promise((r) => setImmediate(r));
    } finally {
      process.off("warning", onWarning);
    }
    expect(warnings).not.toContain("MaxListenersExceededWarning");
  });

  it("a park whose reply is lost is retried: the run sleeps once and wakes once", async () => {
    const base = await apps.store();
    let lostPark = 0;
    const store: Store = Object.create(base) as Store;
    store.park = async (req) => {
      await base.park(req);
      if (lostPark++ === 0) throw new Error("Connection terminated unexpectedly");
    };
    let after = 0;
    const f = flow("retry.nap", {
      durable: true,
      do: async (_: unknown, fx) => {
        await fx.clock.sleep("nap", "1h");
        await fx.step("after", () => ++after);
      },
    });
    const { logger, records } = recordingLogger();
    const app = await apps.make([{ f }], { store, logger });
    await app.invoke(f, {});
    const [run] = await base.listRuns({ flow: "retry.nap" });
    expect(run).toMatchObject({ status: "sleeping" });
    app.time.advance("1h");
    await until(async () => (await base.getRun(run!.id))?.status === "completed", "run completed");
    await app.idle();
    expect(after).toBe(1);
    expect((await base.getJournal(run!.id)).map((e) => [e.kind, entryName(e)])).toEqual([
      ["sleep", "nap"],
      ["step", "after"],
    ]);
    expect(records.map((r) => r.msg)).toContain("durable run: park failed; retrying");
  });
});
