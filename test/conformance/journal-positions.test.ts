// Positions the body took but had not journaled yet: a caught step failure while the trigger retries, and an fx.id() before compensation.
import { describe, expect, it } from "vitest";
import { flow, http, on, signal } from "../../src/index.ts";
import { appFactory, until } from "./app-fixture.ts";
import { drivers } from "./drivers.ts";

describe.each(drivers)("journal positions held back by the session, on the $name driver", (driver) => {
  const apps = appFactory(driver);

  it("a durable consumer with attempts left that catches a failed step takes the same path after a wake", async () => {
    const log: string[] = [];
    let charges = 0;
    const orders = signal.once("orders.placed", { retries: 3 });
    const consumer = on(
      orders,
      flow("orders.process", {
        durable: true,
        do: async (_: unknown, fx) => {
          let charged = false;
          try {
            await fx.step("charge", () => {
              log.push(`charge ${++charges}`);
              if (charges === 1) throw new Error("card declined");
              return "ch_1";
            });
            charged = true;
          } catch {
            await fx.step("notify-declined", () => void log.push("told: declined"));
          }
          await fx.clock.sleep("grace", "1h");
          await fx.step("settle", () => void log.push(charged ? "ship" : "cancel"));
        },
      }),
    );
    const app = await apps.make([{ orders, consumer }]);
    await app.emit(orders, {});
    await until(async () => (await app.operator.sleepers()).length === 1, "the run parked");
    app.time.advance("2h");
    await until(
      async () => (await app.operator.runs({ flow: "orders.process" }))[0]?.status === "completed",
      "the run completed",
    );
    // The declined charge is never run again: replay rethrows its journaled failure.
    expect(log).toEqual(["charge 1", "told: declined", "cancel"]);
    const [run] = await app.operator.runs({ flow: "orders.process" });
    const journal = (await app.operator.run(run!.id))!.journal;
    expect(journal.map((e) => [e.seq, e.kind, e.error === undefined ? "ok" : e.error.message])).toEqual([
      [0, "step", "card declined"],
      [1, "step", "ok"],
      [2, "sleep", "ok"],
      [3, "step", "ok"],
    ]);
  });

  it("a failure the body lets end the attempt is still not journaled: the retry runs the step again", async () => {
    let charges = 0;
    const orders = signal.once("orders.retry", { retries: 3 });
    const consumer = on(
      orders,
      flow("orders.retry", {
        durable: true,
        do: async (_: unknown, fx) => {
          const id = fx.id();
          await fx.step("charge", () => {
            if (++charges === 1) throw new Error("flaky");
            return "ch_1";
          });
          return id;
        },
      }),
    );
    const app = await apps.make([{ orders, consumer }]);
    await app.emit(orders, {});
    await until(async () => (await app.operator.stats("orders.retry")).delivered === 1, "delivered");
    expect(charges).toBe(2);
    const [run] = await app.operator.runs({ flow: "orders.retry" });
    expect(run!.status).toBe("completed");
    expect((await app.operator.run(run!.id))!.journal.map((e) => [e.seq, e.kind])).toEqual([
      [0, "id"],
      [1, "step"],
    ]);
  });

  it("compensation after an id taken since the last write journals its undo after the id, once", async () => {
    const undone: string[] = [];
    const route = on(
      http.post("/go"),
      flow("comp.id", {
        durable: true,
        do: async (_: unknown, fx) => {
          await fx.step("a", () => "A", { undo: (v) => void undone.push(`undo ${v}`) });
          fx.id();
          throw new Error("boom");
        },
      }),
    );
    const app = await apps.make([{ route }]);
    const res = await app.request("/go", { method: "POST" });
    expect(res.status).toBe(500);
    const [run] = await app.operator.runs({ flow: "comp.id" });
    expect(run).toMatchObject({ status: "failed", error: { message: "boom" } });
    expect(undone).toEqual(["undo A"]);
    expect((await app.operator.run(run!.id))!.journal.map((e) => [e.seq, e.kind])).toEqual([
      [0, "step"],
      [1, "id"],
      [2, "undo"],
    ]);
  });
});
