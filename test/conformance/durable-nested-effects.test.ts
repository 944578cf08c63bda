// fx effects inside an fx.step body on every driver: the spec's first example, crash recoveries, journals of the older layout, concurrent steps.
import { describe, expect, it } from "vitest";
import { channel, flow, http, on } from "../../src/index.ts";
import { createTimeTravel } from "../../src/clock/time-travel.ts";
import { runningBodies } from "../../src/durable/step-scope.ts";
import { entryName, type JournalEntry, type Store } from "../../src/store/types.ts";
import { appFactory, gate, recordingLogger, until, type TestApp } from "./app-fixture.ts";
import { drivers } from "./drivers.ts";
import { z } from "zod";

const T0 = 1_000_000;
const RUN = "r-nested-1";
const DAY = 86_400_000;

/** The journal as `seq:kind:name`, for layouts. */
const layout = (journal: readonly JournalEntry[]): string[] =>
  journal.map((e) => `${e.seq}:${e.kind}:${entryName(e)}`);

describe.each(drivers)("fx effects inside a step body on the $name driver", (driver) => {
  const apps = appFactory(driver);

  /**
   * The spec's "Smallest Example" (durable-sleep.md), word for word but for the module around it: a
   * step that calls a flow, a three-day sleep, a step that sends. Counts how often the callee ran.
   */
  function trialsModule() {
    const ran = { startTrial: 0 };
    const trialExpiringEmail = channel("email.trial-expiring", { schema: z.object({ to: z.string() }) });
    const startTrial = flow("trials.startTrial", {
      do: async (_: { email: string }) => {
        ran.startTrial++;
        return { ok: true };
      },
    });
    const start = on(
      http.post("/trials/start"),
      flow("trials.start", {
        durable: true,
        in: z.object({ email: z.string().email() }),
        do: async ({ email }, fx) => {
          await fx.step("mark-trial", async () => {
            await fx.call(startTrial, { email });
          });
          await fx.clock.sleep("expiry-window", "3d");
          await fx.step("notify", async () => {
            await fx.send(trialExpiringEmail, { to: email });
          });
        },
      }),
    );
    return { ran, modules: { start, startTrial, trialExpiringEmail } };
  }

  const runOf = async (app: TestApp, flowName: string) => (await app.operator.runs({ flow: flowName }))[0]!;

  it("the spec's smallest example wakes after three days and completes: the callee ran once, the mail went once", async () => {
    const { ran, modules } = trialsModule();
    const app = await apps.make([modules]);
    const res = await app.request("/trials/start", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ email: "ada@example.com" }),
    });
    expect(res.status).toBe(204);
    app.time.advance("3d");
    await until(async () => (await runOf(app, "trials.start")).status === "completed", "the run completed");
    const run = await runOf(app, "trials.start");
    expect(run.error).toBeUndefined();
    expect(ran.startTrial).toBe(1);
    expect(app.sent.map((m) => m.payload)).toEqual([{ to: "ada@example.com" }]);
    const journal = (await app.operator.run(run.id))!.journal;
    // Each step with effects in its body is closed by a second entry of its name listing their positions.
    expect(layout(journal)).toEqual([
      "0:step:mark-trial",
      "1:call:trials.startTrial",
      "2:step:mark-trial",
      "3:sleep:expiry-window",
      "4:step:notify",
      "5:send:email.trial-expiring",
      "6:step:notify",
    ]);
    expect(journal[2]!.value).toEqual({ nested: [1] });
    expect(journal[6]!.value).toEqual({ nested: [5] });
  });

  it("nested steps, an id and an emit-free send in a body replay after a wake; only the outer step's effects are skipped", async () => {
    const mail = channel("email.nested", { schema: z.object({ n: z.number() }) });
    const seen: string[] = [];
    const route = on(
      http.post("/nested"),
      flow("nested.deep", {
        durable: true,
        do: async (_: unknown, fx) => {
          const outer = await fx.step("outer", async () => {
            const id = fx.id();
            const inner = await fx.step("inner", async () => {
              await fx.send(mail, { n: 1 });
              return "in";
            });
            return `${inner}:${id}`;
          });
          seen.push(outer);
          await fx.clock.sleep("wait", "1h");
          await fx.step("after", () => fx.send(mail, { n: 2 }));
          return outer;
        },
      }),
    );
    const app = await apps.make([{ route, mail }]);
    expect((await app.request("/nested", { method: "POST" })).status).toBe(204);
    app.time.advance("1h");
    await until(async () => (await runOf(app, "nested.deep")).status === "completed", "the run completed");
    const run = await runOf(app, "nested.deep");
    expect(seen).toHaveLength(2);
    expect(seen[1]).toBe(seen[0]);
    expect(run.output).toBe(seen[0]);
    expect(app.sent.map((m) => m.payload)).toEqual([{ n: 1 }, { n: 2 }]);
    const journal = (await app.operator.run(run.id))!.journal;
    expect(layout(journal)).toEqual([
      "0:step:outer",
      "1:id:id",
      "2:step:inner",
      "3:send:email.nested",
      "4:step:inner",
      "5:step:outer",
      "6:sleep:wait",
      "7:step:after",
      "8:send:email.nested",
      "9:step:after",
    ]);
    expect(journal[4]!.value).toEqual({ nested: [3] });
    expect(journal[5]!.value).toEqual({ nested: [1, 2, 3, 4] });
  });

  it("concurrent steps: a sibling's step taken while another body runs is not skipped with that body's effects", async () => {
    const mail = channel("email.concurrent", { schema: z.object({ n: z.number() }) });
    const bodyA = gate();
    const ran: string[] = [];
    const route = on(
      http.post("/concurrent"),
      flow("nested.concurrent", {
        durable: true,
        do: async (_: unknown, fx) => {
          await Promise.all([
            fx.step("a", async () => {
              ran.push("a");
              // Held open until b and b2 have taken their positions: they are not a's.
              await bodyA.promise;
              await fx.send(mail, { n: 1 });
              return "A";
            }),
            (async () => {
              await fx.step("b", () => (ran.push("b"), "B"));
              await fx.step("b2", async () => {
                ran.push("b2");
                bodyA.open();
                await fx.send(mail, { n: 2 });
                return "B2";
              });
            })(),
          ]);
          await fx.clock.sleep("wait", "1h");
          await fx.step("c", () => (ran.push("c"), "C"));
        },
      }),
    );
    const app = await apps.make([{ route, mail }]);
    expect((await app.request("/concurrent", { method: "POST" })).status).toBe(204);
    app.time.advance("1h");
    await until(
      async () => (await runOf(app, "nested.concurrent")).status === "completed",
      "the run completed",
    );
    // The wake replayed a, b and b2 (none ran again, no mail went twice) and ran c.
    expect(ran).toEqual(["a", "b", "b2", "c"]);
    expect(app.sent.map((m) => m.payload)).toEqual([{ n: 2 }, { n: 1 }]);
    const journal = (await app.operator.run((await runOf(app, "nested.concurrent")).id))!.journal;
    const end = (name: string) => journal.filter((e) => e.kind === "step" && entryName(e) === name)[1]?.value;
    // a's body ran while b and b2 took positions 1 and 2: a's end lists its own send only.
    expect(layout(journal).slice(0, 3)).toEqual(["0:step:a", "1:step:b", "2:step:b2"]);
    expect(end("a")).toEqual({ nested: [4] });
    expect(end("b2")).toEqual({ nested: [3] });
  });

  it("a sleep inside a step body parks the run; after the wake the body runs again past the sleep and the step completes", async () => {
    const mail = channel("email.in-step", { schema: z.object({ n: z.number() }) });
    let bodies = 0;
    const route = on(
      http.post("/in-step"),
      flow("nested.sleep", {
        durable: true,
        do: async (_: unknown, fx) => {
          const v = await fx.step("wait-then-send", async () => {
            bodies++;
            await fx.send(mail, { n: 1 });
            await fx.clock.sleep("inside", "1h");
            return "sent";
          });
          return v;
        },
      }),
    );
    const app = await apps.make([{ route, mail }]);
    expect((await app.request("/in-step", { method: "POST" })).status).toBe(204);
    // The parked body never settles in its attempt; it no longer counts as running.
    expect(runningBodies()).toBe(0);
    app.time.advance("1h");
    await until(async () => (await runOf(app, "nested.sleep")).status === "completed", "the run completed");
    const run = await runOf(app, "nested.sleep");
    expect(run.output).toBe("sent");
    expect(bodies).toBe(2);
    expect(app.sent).toHaveLength(1);
    expect(layout((await app.operator.run(run.id))!.journal)).toEqual([
      "0:step:wait-then-send",
      "1:send:email.in-step",
      "2:sleep:inside",
      "3:step:wait-then-send",
    ]);
    expect(runningBodies()).toBe(0);
  });

  /** A run started by an instance that died ("dead/0", lease lapsed), with `entries` journaled. */
  async function diedWith(store: Store, flowName: string, entries: JournalEntry[]): Promise<void> {
    await store.open();
    await store.startRun({
      id: RUN,
      flow: flowName,
      input: { email: "ada@example.com" },
      parentRunId: null,
      owner: "dead/0",
      now: T0,
      leaseMs: 1_000,
    });
    if (entries.length > 0) await store.append({ runId: RUN, owner: "dead/0", now: T0, entries });
  }

  const bootOn = (store: Store, modules: Record<string, unknown>) =>
    apps.make([modules], {
      store,
      time: createTimeTravel(T0 + 60_000),
      config: { durable: { leaseMs: 60_000 } },
    });

  const entry = (seq: number, kind: "step" | "call", name: string, value?: unknown): JournalEntry => ({
    runId: RUN,
    seq,
    kind,
    name,
    at: T0,
    ...(value === undefined ? {} : { value }),
  });

  it("recovered after a crash inside the body: the body runs again and its journaled call is replayed, not run again", async () => {
    const store = await apps.store();
    const { ran, modules } = trialsModule();
    // The step took position 0, its call position 1 (journaled, child id RUN.1); then the process died.
    await diedWith(store, "trials.start", [entry(1, "call", "trials.startTrial", { ok: true })]);
    const app = await bootOn(store, modules);
    await until(async () => (await store.getRun(RUN))?.status === "sleeping", "the run parked");
    app.time.advance("3d");
    await until(async () => (await store.getRun(RUN))?.status === "completed", "the run completed");
    expect(ran.startTrial).toBe(0);
    expect(app.sent).toHaveLength(1);
    expect(layout(await store.getJournal(RUN))).toEqual([
      "0:step:mark-trial",
      "1:call:trials.startTrial",
      "2:step:mark-trial",
      "3:sleep:expiry-window",
      "4:step:notify",
      "5:send:email.trial-expiring",
      "6:step:notify",
    ]);
  });

  it("recovered after a crash past the step: the journaled step and its call are skipped", async () => {
    const store = await apps.store();
    const { ran, modules } = trialsModule();
    await diedWith(store, "trials.start", [
      entry(0, "step", "mark-trial"),
      entry(1, "call", "trials.startTrial", { ok: true }),
      entry(2, "step", "mark-trial", { nested: [1] }),
    ]);
    const app = await bootOn(store, modules);
    await until(async () => (await store.getRun(RUN))?.status === "sleeping", "the run parked");
    app.time.advance("3d");
    await until(async () => (await store.getRun(RUN))?.status === "completed", "the run completed");
    expect(ran.startTrial).toBe(0);
    expect(app.sent).toHaveLength(1);
    expect(layout(await store.getJournal(RUN)).slice(3)).toEqual([
      "3:sleep:expiry-window",
      "4:step:notify",
      "5:send:email.trial-expiring",
      "6:step:notify",
    ]);
  });

  it("a run parked with the older layout (no end entry: the body's call after the step, written before it) wakes and completes", async () => {
    const store = await apps.store();
    const { ran, modules } = trialsModule();
    await diedWith(store, "trials.start", [
      entry(0, "step", "mark-trial"),
      entry(1, "call", "trials.startTrial", { ok: true }),
    ]);
    await store.park({
      runId: RUN,
      owner: "dead/0",
      now: T0,
      entry: {
        runId: RUN,
        seq: 2,
        kind: "sleep",
        label: "expiry-window",
        duration: "3d",
        wakeAt: T0 + 3 * DAY,
        at: T0,
      },
    });
    const app = await bootOn(store, modules);
    app.time.advance("3d");
    await until(async () => (await store.getRun(RUN))?.status === "completed", "the run completed");
    expect(await store.getRun(RUN)).toMatchObject({ status: "completed" });
    expect(ran.startTrial).toBe(0);
    expect(app.sent.map((m) => m.payload)).toEqual([{ to: "ada@example.com" }]);
    expect(layout(await store.getJournal(RUN))).toEqual([
      "0:step:mark-trial",
      "1:call:trials.startTrial",
      "2:sleep:expiry-window",
      "3:step:notify",
      "4:send:email.trial-expiring",
      "5:step:notify",
    ]);
  });

  it("the older layout's tail is passed over only for entries written no later than the step: a changed flow still meets OKE1301 (and is held back)", async () => {
    const store = await apps.store();
    await diedWith(store, "changed.flow", [entry(0, "step", "a")]);
    // Written after "a": not its body's, whatever the code asks for next.
    await store.append({
      runId: RUN,
      owner: "dead/0",
      now: T0 + 5,
      entries: [{ runId: RUN, seq: 1, kind: "call", name: "other.flow", at: T0 + 5 }],
    });
    const route = on(
      http.post("/changed"),
      flow("changed.flow", {
        durable: true,
        do: async (_: unknown, fx) => {
          await fx.step("a", () => 0);
          await fx.step("b", () => 1);
        },
      }),
    );
    const { logger, records } = recordingLogger();
    const app = await apps.make([{ route }], {
      store,
      time: createTimeTravel(T0 + 60_000),
      config: { durable: { leaseMs: 60_000 } },
      logger,
    });
    const mismatch = (r: Record<string, unknown>) => r.code === "OKE1301" && r.runId === RUN;
    await until(() => records.some(mismatch), "the mismatch reported");
    await app.idle();
    expect(records.find(mismatch)!.msg).toContain(
      `journal: run "${RUN}" recorded call "other.flow" at position 1, but the code now asks for step "b"`,
    );
    // Held back for another try (runner.ts blocked), not failed.
    expect(await store.getRun(RUN)).toMatchObject({ status: "running", leaseOwner: null });
  });
});
