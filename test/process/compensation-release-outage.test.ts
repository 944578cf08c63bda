/** A PostgreSQL cut while a durable run begins its compensation or releases its lease: both writes are retried until they commit. */
import { describe, expect, it } from "vitest";
import { createApp, flow, on, signal } from "../../src/index.ts";
import type { RunStatus } from "../../src/store/types.ts";
import { until } from "../conformance/app-fixture.ts";
import { dropSchemaAfterAll, proxiedStore } from "./fleet.ts";

const schema = `followups_cut_${process.pid}`;

dropSchemaAfterAll(schema);

/** A store through a proxy the test cuts, and a logger whose lines it reads. */
const setup = () => proxiedStore(schema, { poolSize: 4 });

describe("compensation and release during a PostgreSQL cut", () => {
  it("a run that fails while the database is cut off begins its compensation once it is back: undo once, failed with the body's error", async () => {
    const { proxy, store, lines, logger, logged, teardown } = await setup();
    const undone: RunStatus[] = [];
    let charged = 0;
    let runId = "";
    const pay = flow("cut.pay", {
      durable: true,
      do: async (_: unknown, fx) => {
        runId = fx.runId;
        await fx.step("charge", () => ++charged, {
          undo: async () => void undone.push((await store.getRun(fx.runId))!.status),
        });
        // Not a step: the failure goes straight to beginCompensation, which meets a dropped pool.
        await proxy.cut();
        throw new Error("card declined");
      },
    });
    const app = createApp({ modules: [{ pay }], env: "test", store, logger });
    try {
      await app.boot();
      const outcome = app.invoke(pay, {}).then(
        () => undefined,
        (e: unknown) => e,
      );
      await until(
        () => logged("durable run: begin compensation failed; retrying").length >= 2,
        "beginCompensation retried twice",
        20_000,
      );
      await proxy.restore();
      expect(await outcome).toMatchObject({ message: "card declined" });
      expect(charged).toBe(1);
      expect(undone).toEqual(["compensating"]);
      expect(await store.getRun(runId)).toMatchObject({
        status: "failed",
        error: { code: "Error", message: "card declined" },
      });
      expect(logged("durable run: begin compensation failed; retrying").every((l) => l.runId === runId)).toBe(
        true,
      );
      expect(lines.filter((l) => String(l.msg).includes("given up"))).toEqual([]);
      expect(logged("durable run: could not record failure")).toEqual([]);
    } finally {
      await teardown(app);
    }
  }, 60_000);

  it("a consumer's attempt that fails with attempts left while the database is cut off releases its run once it is back; the next attempt completes it", async () => {
    const { proxy, store, lines, logger, logged, teardown } = await setup();
    const jobs = signal.once("cut.jobs", { retries: 1 });
    let tries = 0;
    const consumer = on(
      jobs,
      flow("cut.jobs", {
        durable: true,
        do: async (_: unknown, fx) =>
          fx.step("work", async () => {
            if (++tries === 1) {
              // With an attempt left the failure is not journaled: the run is released for the retry.
              await proxy.cut();
              throw new Error("flaky");
            }
            return "done";
          }),
      }),
    );
    const app = createApp({
      modules: [{ consumer }],
      env: "test",
      store,
      logger,
      config: { signals: { leaseMs: 30_000 } },
    });
    try {
      await app.boot();
      const id = "cut-job-1";
      await app.emit(jobs, {}, { id });
      await until(
        () => logged("durable run: release failed; retrying").length >= 2,
        "releaseRun retried twice",
        20_000,
      );
      await proxy.restore();
      // Well within the 30 s lease: the retry found the run released, not held by a lapsing lease.
      await until(
        async () => (await store.getRun(id))?.status === "completed",
        "the run completed by the second attempt",
        20_000,
      );
      expect(tries).toBe(2);
      expect(await store.getRun(id)).toMatchObject({ status: "completed", output: "done", leaseOwner: null });
      await until(
        async () => (await store.getMessage(id))?.status === "delivered",
        "the message delivered",
        20_000,
      );
      expect((await store.getMessage(id))!.attempts).toBe(2);
      expect(logged("durable run: release failed; retrying").every((l) => l.runId === id)).toBe(true);
      expect(lines.filter((l) => String(l.msg).includes("given up"))).toEqual([]);
    } finally {
      await teardown(app);
    }
  }, 60_000);
});
