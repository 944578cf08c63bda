// A durable consumer's delivery whose run start meets a killed PostgreSQL connection retries it: the outage costs the message no attempt; any other error still does.
import pg from "pg";
import { describe, expect, it } from "vitest";
import { appFactory, recordingLogger } from "../../test/conformance/app-fixture.ts";
import { drivers } from "../../test/conformance/drivers.ts";
import { flow, on, signal } from "../index.ts";
import type { Store } from "../store/types.ts";

const postgres = drivers.find((d) => d.name === "postgres")!;

/** What pg gives a query whose connection pg_terminate_backend killed (SQLSTATE 57P01). */
function terminated(): Error {
  const e = new pg.DatabaseError("terminating connection due to administrator command", 0, "error");
  e.code = "57P01";
  e.severity = "FATAL";
  return e;
}

/** `base` (its own isUnavailable and health inherited, sync as they are), whose first `startRun` throws `error`. */
function failingFirstStart(base: Store, error: Error): { store: Store; starts: () => number } {
  let starts = 0;
  const store: Store = Object.create(base) as Store;
  store.startRun = async (req) => {
    starts++;
    if (starts === 1) throw error;
    return base.startRun(req);
  };
  return { store, starts: () => starts };
}

describe("a durable consumer's run start through a store outage, on postgres", () => {
  const apps = appFactory(postgres);

  const setup = () => {
    const jobs = signal.once("outage.jobs");
    const ran: number[] = [];
    const worker = on(
      jobs,
      flow("outage.worker", {
        durable: true,
        do: async (_: unknown, fx) => {
          await fx.step("work", () => ran.push(fx.attempt));
        },
      }),
    );
    return { jobs, ran, modules: [{ jobs, worker }] };
  };

  it("a killed connection on the start is retried: attempt 1 completes the run", async () => {
    const base = await apps.store();
    const { store, starts } = failingFirstStart(base, terminated());
    const { jobs, ran, modules } = setup();
    const { logger, records } = recordingLogger();
    const app = await apps.make(modules, { store, logger });
    await app.emit(jobs, {}, { id: "job-1" });
    await app.idle();
    expect(starts()).toBe(2);
    expect(ran).toEqual([1]);
    expect(await base.getMessage("job-1")).toMatchObject({ status: "delivered", attempts: 1, failures: [] });
    expect(await base.getRun("job-1")).toMatchObject({ status: "completed" });
    expect(records.map((r) => r.msg)).toContain(
      "durable delivery: starting its run failed (the store is unavailable); retrying",
    );
  });

  it("an error that is not an outage still fails the attempt, as before", async () => {
    const base = await apps.store();
    const { store, starts } = failingFirstStart(base, new Error("refused by the store"));
    const { jobs, ran, modules } = setup();
    const app = await apps.make(modules, { store });
    await app.emit(jobs, {}, { id: "job-2" });
    await app.idle();
    expect(starts()).toBe(2);
    expect(ran).toEqual([2]);
    expect(await base.getMessage("job-2")).toMatchObject({
      status: "delivered",
      attempts: 2,
      failures: [{ attempt: 1, message: "refused by the store" }],
    });
  });
});
