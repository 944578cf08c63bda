// fx.emit(signal, payload, { id }) on every driver: a second emit with an id already stored enqueues nothing, in plain and durable flows (replay included), like app.emit.
import { describe, expect, it } from "vitest";
import { flow, http, on, signal } from "../../src/index.ts";
import { appFactory, until } from "./app-fixture.ts";
import { drivers } from "./drivers.ts";

describe.each(drivers)("fx.emit { id } on the $name driver", (driver) => {
  const apps = appFactory(driver);

  const setup = () => {
    const task = signal.once("orders.ship");
    const seen: Array<{ id: string; payload: unknown }> = [];
    const worker = on(
      task,
      flow("orders.shipper", { do: (p: unknown, fx) => void seen.push({ id: fx.runId, payload: p }) }),
    );
    const plain = on(
      http.post("/plain/:order"),
      flow("orders.plain", {
        do: async ({ order }: { order: string }, fx) => {
          await fx.emit(task, { order, from: "plain" }, { id: `ship-${order}` });
          return { ok: true };
        },
      }),
    );
    const durable = on(
      http.post("/durable/:order"),
      flow("orders.durable", {
        durable: true,
        do: async ({ order }: { order: string }, fx) => {
          await fx.emit(task, { order, from: "durable" }, { id: `ship-${order}` });
          // The same id again in the same run: journaled, nothing enqueued.
          await fx.emit(task, { order, from: "again" }, { id: `ship-${order}` });
          await fx.clock.sleep("cool-off", "1h");
          await fx.step("after", () => "done");
        },
      }),
    );
    return { task, seen, modules: [{ task, worker, plain, durable }] };
  };

  it("a plain flow's second emit with the id enqueues nothing and succeeds", async () => {
    const { seen, modules } = setup();
    const app = await apps.make(modules);
    expect((await app.request("/plain/1", { method: "POST" })).status).toBe(200);
    expect((await app.request("/plain/1", { method: "POST" })).status).toBe(200);
    await app.idle();
    expect(seen).toEqual([{ id: "ship-1", payload: { order: "1", from: "plain" } }]);
    // app.emit with the same id is a no-op too; another id is a message of its own.
    const { task } = modules[0]!;
    await app.emit(task, { order: "1", from: "app" }, { id: "ship-1" });
    expect((await app.request("/plain/2", { method: "POST" })).status).toBe(200);
    await app.idle();
    expect(seen.map((s) => s.id).sort()).toEqual(["ship-1", "ship-2"]);
  });

  it("in a durable flow: once per id across emits, runs and the replay after a sleep", async () => {
    const { seen, modules } = setup();
    const app = await apps.make(modules);
    expect((await app.request("/durable/7", { method: "POST" })).status).toBe(204);
    await app.idle();
    expect(seen).toEqual([{ id: "ship-7", payload: { order: "7", from: "durable" } }]);
    // The wake replays the journal: the journaled emits are skipped, nothing is enqueued again.
    app.time.advance("1h");
    const done = async (n: number) =>
      (await app.operator.runs({ flow: "orders.durable", status: "completed" })).length === n;
    await until(() => done(1), "the run completes");
    await app.idle();
    const [run] = await app.operator.runs({ flow: "orders.durable" });
    expect(run?.status).toBe("completed");
    const journal = (await app.operator.run(run!.id))!.journal;
    expect(journal.filter((e) => e.kind === "emit").map((e) => e.value)).toEqual([
      { messageId: "ship-7", key: null },
      { messageId: "ship-7", key: null },
    ]);
    // A second run, and a plain flow, emitting the same id: journaled, nothing enqueued.
    expect((await app.request("/durable/7", { method: "POST" })).status).toBe(204);
    expect((await app.request("/plain/7", { method: "POST" })).status).toBe(200);
    app.time.advance("1h");
    await until(() => done(2), "the second run completes");
    await app.idle();
    const runs = await app.operator.runs({ flow: "orders.durable" });
    expect(runs.map((r) => r.status)).toEqual(["completed", "completed"]);
    expect(seen).toEqual([{ id: "ship-7", payload: { order: "7", from: "durable" } }]);
  });

  it("refuses an empty id (OKE1257) and an id on a broadcast signal (OKE1258)", async () => {
    const task = signal.once("ids.task");
    const news = signal.broadcast("ids.news");
    const w1 = on(task, flow("ids.worker", { do: () => undefined }));
    const w2 = on(news, flow("ids.reader", { do: () => undefined }));
    const empty = on(
      http.post("/empty"),
      flow("ids.empty", { do: async (_: unknown, fx) => fx.emit(task, undefined, { id: "" }) }),
    );
    const fanout = on(
      http.post("/fanout"),
      flow("ids.fanout", {
        durable: true,
        do: async (_: unknown, fx) => fx.emit(news, undefined, { id: "n1" }),
      }),
    );
    const app = await apps.make([{ task, news, w1, w2, empty, fanout }]);
    const codeOf = async (path: string) =>
      ((await (await app.request(path, { method: "POST" })).json()) as { error: { code: string } }).error
        .code;
    expect(await codeOf("/empty")).toBe("OKE1257");
    expect(await codeOf("/fanout")).toBe("OKE1258");
    expect((await app.operator.stats("ids.task")).pending).toBe(0);
  });
});

describe.each(drivers)(
  "an emit { id } that reuses another signal's message id, on the $name driver",
  (driver) => {
    const apps = appFactory(driver);

    it("is refused with OKE1263 from app.emit, a plain flow and a durable flow; the first message stays, nothing else is enqueued", async () => {
      const placed = signal.once("orders.placed");
      const shipped = signal.once("orders.shipped");
      const handled: string[] = [];
      const onPlaced = on(placed, flow("orders.onPlaced", { do: () => void handled.push("placed") }));
      const onShipped = on(shipped, flow("orders.onShipped", { do: () => void handled.push("shipped") }));
      const plain = on(
        http.post("/plain"),
        flow("orders.plainShip", { do: async (_: unknown, fx) => fx.emit(shipped, {}, { id: "order-42" }) }),
      );
      const durable = on(
        http.post("/durable"),
        flow("orders.durableShip", {
          durable: true,
          do: async (_: unknown, fx) => fx.emit(shipped, {}, { id: "order-42" }),
        }),
      );
      const app = await apps.make([{ placed, shipped, onPlaced, onShipped, plain, durable }]);
      await app.emit(placed, {}, { id: "order-42" });
      await until(() => handled.length === 1, "the placed message handled");
      const refusal = {
        code: "OKE1263",
        message: `"orders.shipped": emit { id: "order-42" } reuses the id of a message of "orders.placed"; nothing was enqueued`,
      };
      await expect(app.emit(shipped, {}, { id: "order-42" })).rejects.toMatchObject(refusal);
      for (const path of ["/plain", "/durable"]) {
        const res = await app.request(path, { method: "POST" });
        expect(res.status).toBe(500);
        expect(((await res.json()) as { error: { code: string } }).error.code).toBe("OKE1263");
      }
      // The same id on the same signal is still an idempotent no-op.
      await app.emit(placed, {}, { id: "order-42" });
      await app.idle();
      expect(handled).toEqual(["placed"]);
      expect(await app.operator.stats("orders.shipped")).toMatchObject({
        pending: 0,
        inflight: 0,
        dead: 0,
        delivered: 0,
      });
      expect((await app.store.getMessage("order-42"))?.signal).toBe("orders.placed");
    });
  },
);
