// What a durable flow catches from a failed step or call is the same on the first attempt and on replay; odd sleep durations and BigInt values, on every driver.
import { describe, expect, it } from "vitest";
import { flow, http, on, OkeError } from "../../src/index.ts";
import { StepError } from "../../src/durable/session.ts";
import { appFactory, recordingLogger, until, type TestApp } from "./app-fixture.ts";
import { drivers } from "./drivers.ts";

class Declined extends Error {
  override name = "Declined";
  readonly reason = "insufficient_funds";
  readonly limit = { cents: 500 };
  readonly retry = () => false; // not JSON: left out
}

/** Everything code could branch on, of what a catch got. */
function seen(e: unknown): Record<string, unknown> {
  const err = e as Error & Record<string, unknown>;
  return {
    stepError: e instanceof StepError,
    okeError: e instanceof OkeError,
    declined: e instanceof Declined,
    name: err.name,
    code: err.code,
    message: err.message,
    reason: err.reason,
    limit: err.limit,
    retry: typeof err.retry,
    status: err.status,
    fix: err.fix,
    details: err.details,
    cause: err.cause instanceof Error ? { name: err.cause.name, message: err.cause.message } : err.cause,
  };
}

describe.each(drivers)("failed steps and calls on the $name driver", (driver) => {
  const apps = appFactory(driver);
  const runOf = async (app: TestApp, name: string) => (await app.operator.runs({ flow: name }))[0]!;

  it("a caught step failure, an OkeError and a failed call are the same objects to the body before and after a wake", async () => {
    const caught: Array<Record<string, unknown>> = [];
    const paths: string[] = [];
    const payments = flow("pay.charge", {
      do: async () => {
        throw new Declined("card declined", { cause: new RangeError("over limit") });
      },
    });
    const route = on(
      http.post("/pay"),
      flow("pay.flow", {
        durable: true,
        do: async (_: unknown, fx) => {
          try {
            await fx.step("charge", () => {
              throw new Declined("card declined");
            });
          } catch (e) {
            caught.push(seen(e));
            // The documented way to tell a journaled failure apart: its name and code.
            if (e instanceof StepError && e.name === "Declined") await fx.step("notify-declined", () => 1);
            else await fx.step("alert-ops", () => 1);
          }
          try {
            await fx.step("lookup", () => {
              throw new OkeError({
                code: "E_GONE",
                message: "no such card",
                status: 404,
                fix: "Add a card.",
                details: { id: 7 },
              });
            });
          } catch (e) {
            caught.push(seen(e));
            paths.push(e instanceof OkeError && e.status === 404 ? "404" : "other");
          }
          try {
            await fx.call(payments, {});
          } catch (e) {
            caught.push(seen(e));
          }
          await fx.clock.sleep("w", "1h");
          return "ok";
        },
      }),
    );
    const app = await apps.make([{ route, payments }]);
    expect((await app.request("/pay", { method: "POST" })).status).toBe(204);
    app.time.advance("1h");
    await until(async () => (await runOf(app, "pay.flow")).status === "completed", "the run completed");
    expect(caught).toHaveLength(6);
    const [first, replay] = [caught.slice(0, 3), caught.slice(3)];
    expect(replay).toEqual(first);
    expect(paths).toEqual(["404", "404"]);
    expect(first[0]).toEqual({
      stepError: true,
      okeError: false,
      declined: false,
      name: "Declined",
      code: "Declined",
      message: "card declined",
      reason: "insufficient_funds",
      limit: { cents: 500 },
      retry: "undefined",
      status: undefined,
      fix: undefined,
      details: undefined,
      cause: undefined,
    });
    expect(first[1]).toMatchObject({
      stepError: false,
      okeError: true,
      name: "OkeError",
      code: "E_GONE",
      message: "no such card",
      status: 404,
      fix: "Add a card.",
      details: { id: 7 },
    });
    expect(first[2]).toMatchObject({
      stepError: true,
      name: "Declined",
      code: "Declined",
      reason: "insufficient_funds",
      cause: { name: "RangeError", message: "over limit" },
    });
    const journal = (await app.operator.run((await runOf(app, "pay.flow")).id))!.journal;
    expect(journal.map((e) => `${e.kind}:${"name" in e ? e.name : e.label}`)).toEqual([
      "step:charge",
      "step:notify-declined",
      "step:lookup",
      "call:pay.charge",
      "sleep:w",
    ]);
  });

  it("an uncaught OkeError from a step keeps its status on the HTTP answer; the run fails with its code", async () => {
    const route = on(
      http.post("/gone"),
      flow("gone.flow", {
        durable: true,
        do: async (_: unknown, fx) => {
          await fx.step("find", () => {
            throw new OkeError({ code: "E_GONE", message: "gone", status: 404 });
          });
        },
      }),
    );
    const app = await apps.make([{ route }]);
    const res = await app.request("/gone", { method: "POST" });
    expect(res.status).toBe(404);
    expect(await runOf(app, "gone.flow")).toMatchObject({
      status: "failed",
      error: { code: "E_GONE", message: "gone" },
    });
  });

  it.each([
    ["true", true, "true"],
    ["an object", { ms: 5 }, '{"ms":5}'],
    ["a number", 5000, "5000"],
    ["NaN", Number.NaN, "NaN"],
  ])(
    "a sleep for %s (plain JavaScript) waits 0 ms, journaled as text, with a warning that shows it",
    async (_, duration, text) => {
      const { logger, records } = recordingLogger();
      const f = flow("odd.sleep", {
        durable: true,
        do: async (_in: unknown, fx) => {
          await (fx.clock.sleep as (label: string, d: unknown) => Promise<void>)("l", duration);
          return "after";
        },
      });
      const app = await apps.make([{ f }], { logger });
      expect(await app.invoke("odd.sleep", {})).toBe("after");
      const run = await runOf(app, "odd.sleep");
      expect(run.status).toBe("completed");
      const [sleep] = (await app.operator.run(run.id))!.journal;
      expect(sleep).toMatchObject({ kind: "sleep", label: "l", duration: text, wakeAt: sleep!.at });
      expect(records.filter((r) => r.level === 40).map((r) => r.msg)).toEqual([
        `flow "odd.sleep": fx.clock.sleep("l", ${text}) is not a duration (<integer><ms|s|m|h|d>, e.g. "5s"), so it waits 0 ms`,
      ]);
    },
  );

  it("a BigInt in a step's value fails the step with OKE1306 naming the step, the run and where it is", async () => {
    const f = flow("big.int", {
      durable: true,
      do: async (_: unknown, fx) => {
        try {
          await fx.step("count", () => ({ rows: [1n] }));
        } catch (e) {
          return { code: (e as OkeError).code, message: (e as Error).message };
        }
        return "no";
      },
    });
    const app = await apps.make([{ f }]);
    const r = await app.invoke("big.int", {});
    const run = await runOf(app, "big.int");
    expect(r).toEqual({
      code: "OKE1306",
      message: `step "count" of run "${run.id}": value at $.rows[0] is a BigInt, which JSON cannot hold`,
    });
  });
});
