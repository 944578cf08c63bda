// fx.call of a durable callee names the child by the parent run and journal position: a replay after a lost call entry finds the same child.
import { describe, expect, it } from "vitest";
import { createTimeTravel, flow, http, on, signal } from "../../src/index.ts";
import type { Store } from "../../src/store/types.ts";
import { appFactory, until } from "./app-fixture.ts";
import { drivers } from "./drivers.ts";

const T0 = 1_000_000;

/** The store, except that the first append of a `call` entry throws and every write after it fails (the process "died"). */
function dyingAtCallEntry(store: Store): Store {
  let dead = false;
  const writes = new Set(["append", "park", "finish", "releaseRun", "beginCompensation"]);
  return new Proxy(store, {
    get(target, key, receiver) {
      const v = Reflect.get(target, key, receiver) as unknown;
      if (typeof v !== "function") return v;
      const fn = v as (...a: unknown[]) => unknown;
      if (key === "append")
        return async (req: Parameters<Store["append"]>[0]) => {
          if (dead || req.entries.some((e) => e.kind === "call")) {
            dead = true;
            throw new Error("store lost: the call entry was never journaled");
          }
          return fn.call(target, req);
        };
      if (typeof key === "string" && writes.has(key) && dead)
        return async () => {
          throw new Error("store lost");
        };
      return fn.bind(target);
    },
  });
}

describe.each(drivers.filter((d) => d.name !== "file"))(
  "derived child run ids on the $name driver",
  (driver) => {
    const apps = appFactory(driver);

    it("a parent resumed after its call entry was lost finds the child it started: one child, its step ran once", async () => {
      let childSteps = 0;
      const child = flow("kids.child", {
        durable: true,
        do: async (_: unknown, fx) => fx.step("work", () => ++childSteps),
      });
      const parent = on(
        http.post("/p"),
        flow("kids.parent", {
          durable: true,
          do: async (_: unknown, fx) => {
            const n = await fx.call(child, {});
            await fx.step("after", () => n);
          },
        }),
      );
      const store = await apps.store();
      await store.open();
      const time1 = createTimeTravel(T0);
      const app1 = await apps.make([{ parent }], { store: dyingAtCallEntry(store), time: time1 });
      // The failed write is retried until a whole lease of failures passed on the app's clock; then the
      // instance gives the run up to its lease, as a dead one would.
      let status: number | undefined;
      void app1.request("/p", { method: "POST" }).then((r) => (status = r.status));
      await until(() => {
        time1.advance(10_000);
        return status !== undefined;
      }, "the first instance gives up");
      expect(status).toBeGreaterThanOrEqual(400);
      const [run] = (await store.listRuns({ flow: "kids.parent" })) ?? [];
      expect(run?.status).toBe("running");
      // A second instance after the first one's lease lapsed: the boot orphan scan resumes the parent.
      const app2 = await apps.make([{ parent }], { store, time: createTimeTravel(time1.now() + 120_000) });
      await until(
        async () => (await app2.operator.run(run!.id))?.run.status === "completed",
        "parent completes",
      );
      const children = await store.listRuns({ flow: "kids.child" });
      expect(children.map((c) => c.id)).toEqual([`${run!.id}.0`]);
      expect(children[0]!.parentRunId).toBe(run!.id);
      expect(childSteps).toBe(1);
    });
  },
);

describe.each(drivers)("a run id taken by another flow's run, on the $name driver", (driver) => {
  const apps = appFactory(driver);

  it("a durable consumer whose message id is another flow's child run id never settles as that run: dead with OKE1305", async () => {
    const issue = signal.once("invoices.issue");
    const remind = signal.once("invoices.remind", { retries: 1 });
    const ran: string[] = [];
    const render = flow("invoices.render", { durable: true, do: async () => (ran.push("render"), "pdf") });
    const a = on(
      issue,
      flow("invoices.issuer", {
        durable: true,
        do: async (_: unknown, fx) => {
          await fx.call(render, {});
          ran.push("issue");
        },
      }),
    );
    const b = on(
      remind,
      flow("invoices.reminder", { durable: true, do: async () => void ran.push("remind") }),
    );
    const app = await apps.make([{ issue, remind, render, a, b }]);
    await app.emit(issue, {}, { id: "inv-7" });
    await until(async () => (await app.operator.stats("invoices.issue")).delivered === 1, "issued");
    // fx.call named the child run "inv-7.0"; a message with that id on another consumer's signal:
    await app.emit(remind, {}, { id: "inv-7.0" });
    await until(async () => (await app.operator.stats("invoices.remind")).dead === 1, "the reminder dead");
    const [dead] = await app.operator.deadLetters("invoices.remind");
    expect(dead!.failures.map((f) => f.code)).toEqual(["OKE1305", "OKE1305"]);
    expect(dead!.failures[0]!.message).toBe(
      'journal: run "inv-7.0" of flow "invoices.reminder" cannot start: a run of flow "invoices.render" has that id',
    );
    expect(ran).toEqual(["render", "issue"]);
    expect((await app.store.getRun("inv-7.0"))?.flow).toBe("invoices.render");
  });
});
