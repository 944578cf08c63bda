// A journal mismatch (OKE1301) the flow's own try/catch swallows still holds the run back: it never completes or fails on the new code.
import { afterEach, describe, expect, it } from "vitest";
import { until } from "../../test/conformance/app-fixture.ts";
import { createApp } from "../app/app.ts";
import type { App } from "../app/types.ts";
import { createTimeTravel, type TimeTravel } from "../clock/time-travel.ts";
import { flow } from "../flow/flow.ts";
import type { Fx } from "../fx/types.ts";
import { createMemoryStore } from "../store/memory/memory-store.ts";
import { entryName, type Store } from "../store/types.ts";

const apps: App[] = [];
afterEach(async () => {
  for (const app of apps.splice(0)) await app.stop({ timeoutMs: 2_000 });
});

type Body = (fx: Fx) => Promise<unknown>;
const version = (body: Body) =>
  flow("trials.caught", { durable: true, do: async (_: { n: number }, fx: Fx) => body(fx) });

/**
 * The first version journals step "a", step "b", sleeps a minute, then step "after"; what the run saw comes
 * back as its output. Each step takes a millisecond, as on a real store, unless `tie`: the entries then
 * share their `at`, as fast steps on a fast store may.
 */
const firstVersion =
  (time: TimeTravel, tie = false): Body =>
  async (fx) => {
    const tick = (): void => void (tie || time.advance(1));
    const a = await fx.step("a", () => (tick(), { id: "A1" }));
    await fx.step("b", () => (tick(), 2));
    await fx.clock.sleep("w", "1m");
    return fx.step("after", () => a);
  };

async function boot(store: Store, time: TimeTravel, body: Body): Promise<App> {
  const v = version(body);
  const app = createApp({ modules: [{ v }], env: "test", clock: time, store });
  apps.push(app);
  await app.boot();
  return app;
}

/** A run of the first version, sleeping, then an app on `next` with the wake due: resolves once the new code's attempt ended. */
async function deployed(next: Body, tie = false): Promise<{ store: Store; runId: string; app: App }> {
  const store = createMemoryStore();
  const time = createTimeTravel(1_000_000);
  const old = await boot(store, time, firstVersion(time, tie));
  const v = version(firstVersion(time, tie));
  await old.invoke(v, { n: 1 });
  await old.stop();
  const [run] = await store.listRuns({ status: "sleeping" });
  const app = await boot(store, time, next);
  time.advance("1m");
  await until(async () => {
    const r = await store.getRun(run!.id);
    return r?.status !== "sleeping" && r?.leaseOwner === null;
  }, "the wake's attempt ended");
  await app.idle();
  return { store, runId: run!.id, app };
}

describe("a journal mismatch the flow catches", () => {
  it("holds the run back instead of completing it with the catch's fallback value", async () => {
    // Step "a" renamed, inside the try/catch the flow had for the step's own failures.
    const { store, runId } = await deployed(async (fx) => {
      let a: unknown;
      try {
        a = await fx.step("a-renamed", () => ({ id: "A1" }));
      } catch {
        a = { id: "fallback" };
      }
      await fx.step("b", () => 2);
      await fx.clock.sleep("w", "1m");
      return fx.step("after", () => a);
    });
    const run = await store.getRun(runId);
    expect(run).toMatchObject({ status: "running", held: { code: "OKE1301" } });
    expect(run!.output).toBeUndefined();
    expect((await store.getJournal(runId)).map((e) => `${e.kind}:${entryName(e)}`)).toEqual([
      "step:a",
      "step:b",
      "sleep:w",
    ]);
  });

  it("holds the run back instead of failing it with the error the catch threw: no undo runs", async () => {
    const undone: string[] = [];
    const { store, runId } = await deployed(async (fx) => {
      await fx.step("a", () => ({ id: "A1" }), { undo: () => void undone.push("a") });
      try {
        await fx.step("b-renamed", () => 2);
      } catch {
        throw new Error("charge failed");
      }
      return null;
    });
    const run = await store.getRun(runId);
    expect(run).toMatchObject({ status: "running", held: { code: "OKE1301" } });
    expect(run!.error ?? null).toBeNull();
    expect(undone).toEqual([]);
  });

  it("after the deploy is reverted the run goes on with what it journaled", async () => {
    const { store, runId, app } = await deployed(async (fx) => {
      try {
        await fx.step("a-renamed", () => 0);
      } catch {
        // swallowed
      }
      return "new code";
    });
    expect((await store.getRun(runId))?.held?.code).toBe("OKE1301");
    await app.stop();
    const time = createTimeTravel(2_000_000);
    await boot(store, time, firstVersion(time));
    await until(async () => (await store.getRun(runId))?.status === "completed", "completed");
    expect((await store.getRun(runId))?.output).toEqual({ id: "A1" });
  });

  it("entries written in the same millisecond as the step before them are not taken for that step's body: a renamed step is held back, not run again past the sleep", async () => {
    const { store, runId } = await deployed(async (fx) => {
      const a = await fx.step("a", () => ({ id: "A1" }));
      await fx.step("b-renamed", () => 2);
      await fx.clock.sleep("w", "1m");
      return fx.step("after", () => a);
    }, true);
    const run = await store.getRun(runId);
    expect(run).toMatchObject({
      status: "running",
      held: {
        code: "OKE1301",
        message: `journal: run "${runId}" recorded step "b" at position 1, but the code now asks for step "b-renamed"`,
      },
    });
    expect((await store.getJournal(runId)).map((e) => `${e.kind}:${entryName(e)}`)).toEqual([
      "step:a",
      "step:b",
      "sleep:w",
    ]);
  });

  it("a flow that now returns before the sleep its run was parked on is held back, not completed without the rest", async () => {
    const { store, runId } = await deployed(async (fx) => {
      await fx.step("a", () => ({ id: "A1" }));
      await fx.step("b", () => 2);
      return "early";
    });
    const run = await store.getRun(runId);
    expect(run).toMatchObject({
      status: "running",
      held: {
        code: "OKE1301",
        message: `journal: run "${runId}" recorded sleep "w" at position 2, but the code now returns before it`,
      },
    });
    expect(run!.output).toBeUndefined();
  });

  it("a flow that now fails before the end of its journal is held back, not failed: no undo runs", async () => {
    const undone: string[] = [];
    const { store, runId } = await deployed(async (fx) => {
      await fx.step("a", () => ({ id: "A1" }), { undo: () => void undone.push("a") });
      const input = {} as { plan?: string };
      input.plan!.toUpperCase(); // a field the new input schema requires, absent from the stored input
      await fx.step("b", () => 2);
      await fx.clock.sleep("w", "1m");
      return null;
    });
    const run = await store.getRun(runId);
    expect(run).toMatchObject({ status: "running", held: { code: "OKE1301" } });
    expect(run!.held!.message).toBe(
      `journal: run "${runId}" recorded step "b" at position 1, but the code now fails before it: TypeError: Cannot read properties of undefined (reading 'toUpperCase')`,
    );
    expect(run!.error ?? null).toBeNull();
    expect(undone).toEqual([]);
  });
});
