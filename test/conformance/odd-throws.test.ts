// A durable flow that throws a value String() cannot convert still fails its run (and dead-letters its message), on every driver.
import { describe, expect, it } from "vitest";
import { flow, http, on, signal } from "../../src/index.ts";
import { appFactory, until } from "./app-fixture.ts";
import { drivers } from "./drivers.ts";

/** An object without a prototype: `String()` of it throws "Cannot convert object to primitive value". */
const bare = (): object => Object.assign(Object.create(null) as object, { reason: "nope" });
const recorded = { code: "Error", message: '{"reason":"nope"}' };

describe.each(drivers)("a thrown value String() cannot convert, on the $name driver", (driver) => {
  const apps = appFactory(driver);

  it("fails the run of a durable route once, with the value as text", async () => {
    let ran = 0;
    const r = on(
      http.post("/go"),
      flow("odd.route", {
        durable: true,
        do: async (_: unknown, fx) => {
          ran++;
          await fx.step("s", () => 1);
          throw bare();
        },
      }),
    );
    const app = await apps.make([{ r }]);
    expect((await app.request("/go", { method: "POST" })).status).toBe(500);
    const [run] = await app.operator.runs({ flow: "odd.route" });
    expect(run).toMatchObject({ status: "failed", error: recorded });
    expect(ran).toBe(1);
  });

  it("dead-letters a durable consumer's message and fails its run: both say the same", async () => {
    const jobs = signal.once("odd.jobs", { retries: 1 });
    const w = on(
      jobs,
      flow("odd.jobs", {
        durable: true,
        do: async (_: unknown, fx) => {
          await fx.step("s", () => 1);
          throw bare();
        },
      }),
    );
    const app = await apps.make([{ jobs, w }]);
    await app.emit(jobs, {});
    await until(async () => (await app.operator.stats("odd.jobs")).dead === 1, "the message dead");
    const [dead] = await app.operator.deadLetters("odd.jobs");
    expect(dead!.failures.map((f) => ({ code: f.code, message: f.message }))).toEqual([recorded, recorded]);
    await until(
      async () => (await app.operator.runs({ flow: "odd.jobs" }))[0]?.status === "failed",
      "the run failed",
    );
  });
});
