// A parent whose fx.call reads its failed child's end from the store (the child ended on another instance after a crash) catches the same error it would have caught driving the child itself; on every driver.
import { describe, expect, it } from "vitest";
import { flow } from "../../src/index.ts";
import { createTimeTravel } from "../../src/clock/time-travel.ts";
import { appFactory, until } from "./app-fixture.ts";
import { drivers } from "./drivers.ts";

const T = 1_000_000;
const LEASE = 30_000;

/** A business error a parent branches on: its name and an own field. */
class Declined extends Error {
  override name = "Declined";
  reason = "insufficient_funds";
}

const child = flow("pay.charge", {
  durable: true,
  do: async (_: unknown, fx) => {
    await fx.step("authorize", () => "auth-1");
    throw new Declined("card declined");
  },
});
const parent = flow("pay.order", {
  durable: true,
  do: async (_: unknown, fx) => {
    try {
      await fx.call(child, {});
      return { branch: "paid" };
    } catch (e) {
      const err = e as Error & { reason?: string; code?: string; status?: number };
      // The branch a business flow takes: only a decline with that reason is the customer's to fix.
      const branch =
        err.name === "Declined" && err.reason === "insufficient_funds" ? "notify-declined" : "escalate";
      return { branch, name: err.name, code: err.code, reason: err.reason, status: err.status };
    }
  },
});

describe.each(drivers)("a failed child read from the store after a crash, on the $name driver", (driver) => {
  const apps = appFactory(driver);

  it("rebuilds the child's error with its name and own fields, so the parent takes the same branch", async () => {
    const store = await apps.store();
    await store.open();
    // What a SIGKILL mid-call leaves: the parent and its child (p1.0, the call at position 0) both
    // held by the dead instance.
    for (const [id, flowName, parentRunId] of [
      ["p1", "pay.order", null],
      ["p1.0", "pay.charge", "p1"],
    ] as const)
      await store.startRun({
        id,
        flow: flowName,
        input: {},
        parentRunId,
        owner: "dead/1",
        now: T,
        leaseMs: LEASE,
      });
    // An instance with only the child's flow takes the child over and ends it: failed, undos none.
    const later = createTimeTravel(T + LEASE + 1_000);
    const b = await apps.make([{ child }], { store, time: later });
    await until(async () => (await store.getRun("p1.0"))?.status === "failed", "the child failed");
    await b.stop();
    // The parent's instance comes back: its call finds the child ended, and reads how.
    const a = await apps.make([{ parent, child }], { store, time: later });
    await until(async () => (await store.getRun("p1"))?.status === "completed", "the parent done");
    expect((await store.getRun("p1"))!.output).toEqual({
      branch: "notify-declined",
      name: "Declined",
      code: "Declined",
      reason: "insufficient_funds",
    });
    // The same as a parent that drove its child itself, without a crash.
    expect(await a.invoke(parent, {})).toEqual({
      branch: "notify-declined",
      name: "Declined",
      code: "Declined",
      reason: "insufficient_funds",
    });
  });
});
