// Idempotency-Key on every driver: a retry gets the first answer, a different request 422, one running 409.
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { flow, http, on, signal, OkeError } from "../../src/index.ts";
import { appFactory, gate, until } from "./app-fixture.ts";
import { drivers } from "./drivers.ts";
import type { Store } from "../../src/store/types.ts";

// Idempotency-Key and app.emit(…, { id }) on every driver: a retry never runs the work twice.

const post = (body: unknown, key?: string, method = "POST"): RequestInit => ({
  method,
  headers: { "content-type": "application/json", ...(key === undefined ? {} : { "idempotency-key": key }) },
  body: JSON.stringify(body),
});

describe.each(drivers)("idempotent retries on the $name driver", (driver) => {
  const apps = appFactory(driver);

  const orderApp = async () => {
    let runs = 0;
    const create = on(
      http.post("/orders"),
      flow("orders.create", {
        in: z.object({ sku: z.string() }),
        do: ({ sku }, fx) => ({ orderId: fx.id(), sku, run: ++runs }),
      }),
    );
    const app = await apps.make([{ create }]);
    return { app, runs: () => runs };
  };

  it("runs the first request; a retry with the same key and body gets the same status and body", async () => {
    const { app, runs } = await orderApp();
    const first = await app.request("/orders", post({ sku: "a" }, "key-1"));
    expect(first.status).toBe(200);
    const firstBody = await first.text();
    const retry = await app.request("/orders", post({ sku: "a" }, "key-1"));
    expect(retry.status).toBe(200);
    expect(await retry.text()).toBe(firstBody);
    expect(retry.headers.get("idempotent-replayed")).toBe("true");
    expect(first.headers.get("idempotent-replayed")).toBeNull();
    expect(runs()).toBe(1);
    // Without a key every request runs.
    await app.request("/orders", post({ sku: "a" }));
    await app.request("/orders", post({ sku: "a" }));
    expect(runs()).toBe(3);
  });

  it("refuses the same key with a different body (422 OKE1441) or a bad key (400 OKE1443)", async () => {
    const { app, runs } = await orderApp();
    await app.request("/orders", post({ sku: "a" }, "key-2"));
    const other = await app.request("/orders", post({ sku: "b" }, "key-2"));
    expect(other.status).toBe(422);
    expect(((await other.json()) as { error: { code: string } }).error.code).toBe("OKE1441");
    const bad = await app.request("/orders", post({ sku: "a" }, "x".repeat(256)));
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { code: string } }).error.code).toBe("OKE1443");
    expect(runs()).toBe(1);
  });

  it("answers 409 OKE1442 to a retry while the first request still runs, then the first response", async () => {
    const hold = gate();
    const started = gate();
    let runs = 0;
    const slow = on(
      http.put("/slow/:id"),
      flow("slow", {
        do: async ({ id }: { id: string }) => {
          runs++;
          started.open();
          await hold.promise;
          return { id };
        },
      }),
    );
    const app = await apps.make([{ slow }]);
    const first = app.request("/slow/1", post({}, "key-3", "PUT"));
    await started.promise;
    const during = await app.request("/slow/1", post({}, "key-3", "PUT"));
    expect(during.status).toBe(409);
    expect(((await during.json()) as { error: { code: string } }).error.code).toBe("OKE1442");
    hold.open();
    expect(await (await first).json()).toEqual({ ok: true, data: { id: "1" } });
    const after = await app.request("/slow/1", post({}, "key-3", "PUT"));
    expect(await after.json()).toEqual({ ok: true, data: { id: "1" } });
    expect(runs).toBe(1);
  });

  it("a parked durable flow answers 204 again, and only one run exists", async () => {
    const start = on(
      http.post("/trials"),
      flow("trials.start", {
        durable: true,
        do: async (_input: unknown, fx) => {
          await fx.clock.sleep("expiry-window", "3d");
        },
      }),
    );
    const app = await apps.make([{ start }]);
    expect((await app.request("/trials", post({ email: "a@x" }, "key-4"))).status).toBe(204);
    const retry = await app.request("/trials", post({ email: "a@x" }, "key-4"));
    expect(retry.status).toBe(204);
    expect(retry.headers.get("idempotent-replayed")).toBe("true");
    expect(await app.operator.runs()).toHaveLength(1);
  });

  it("stores 4xx answers; a 5xx frees the key so a retry runs again", async () => {
    let calls = 0;
    const pay = on(
      http.post("/pay"),
      flow("pay", {
        do: () => {
          calls++;
          if (calls === 1) throw new Error("database went away");
          throw new OkeError({ code: "APP409", status: 409, message: "Already paid" });
        },
      }),
    );
    const app = await apps.make([{ pay }]);
    expect((await app.request("/pay", post({}, "key-5"))).status).toBe(500);
    expect((await app.request("/pay", post({}, "key-5"))).status).toBe(409);
    const replayed = await app.request("/pay", post({}, "key-5"));
    expect(replayed.status).toBe(409);
    expect(replayed.headers.get("idempotent-replayed")).toBe("true");
    expect(calls).toBe(2);
  });

  it("a passing refusal (any OkeError with passing, not only JournalLeaseBusy) frees the key; a retry runs again", async () => {
    let calls = 0;
    const book = on(
      http.post("/book"),
      flow("book", {
        do: () => {
          calls++;
          if (calls === 1)
            throw new OkeError({ code: "APP_BUSY", status: 409, message: "Seat held", passing: true });
          return { booked: true };
        },
      }),
    );
    const app = await apps.make([{ book }]);
    const busy = await app.request("/book", post({}, "key-busy"));
    expect(busy.status).toBe(409);
    expect(((await busy.json()) as { error: { code: string } }).error.code).toBe("APP_BUSY");
    const retry = await app.request("/book", post({}, "key-busy"));
    expect(retry.status).toBe(200);
    expect(retry.headers.get("idempotent-replayed")).toBeNull();
    const replayed = await app.request("/book", post({}, "key-busy"));
    expect(replayed.status).toBe(200);
    expect(replayed.headers.get("idempotent-replayed")).toBe("true");
    expect(calls).toBe(2);
  });

  it("forgets a key after the window (http.idempotencyWindowMs)", async () => {
    let runs = 0;
    const create = on(http.post("/orders"), flow("orders.create", { do: () => ({ run: ++runs }) }));
    const app = await apps.make([{ create }], { config: { http: { idempotencyWindowMs: 60_000 } } });
    await app.request("/orders", post({}, "key-6"));
    await app.request("/orders", post({}, "key-6"));
    expect(runs).toBe(1);
    app.time.advance(61_000);
    expect(await (await app.request("/orders", post({}, "key-6"))).json()).toEqual({
      ok: true,
      data: { run: 2 },
    });
    // The key lives again, with the new request's record.
    await until(async () => (await app.store.getIdempotencyKey("key-6"))?.status === "done", "new record");
  });

  it("gives the same answers over a real socket", async () => {
    const { app, runs } = await orderApp();
    const { port } = await app.start({ port: 0, host: "127.0.0.1" });
    const url = `http://127.0.0.1:${port}/orders`;
    const a = await fetch(url, post({ sku: "s" }, "key-7"));
    const b = await fetch(url, post({ sku: "s" }, "key-7"));
    expect(b.status).toBe(a.status);
    expect(await b.text()).toBe(await a.text());
    expect(b.headers.get("idempotent-replayed")).toBe("true");
    expect((await fetch(url, post({ sku: "t" }, "key-7"))).status).toBe(422);
    expect(runs()).toBe(1);
  });

  it("a takeover runs a plain flow again; its emits and its calls' emits are enqueued once", async () => {
    const task = signal.once("tasks.placed");
    const audit = signal.once("tasks.audit");
    const seen: unknown[] = [];
    const hold = gate();
    const started = gate();
    let runs = 0;
    const record = flow("tasks.record", { do: async (_: unknown, fx) => fx.emit(audit, { n: 1 }) });
    const create = on(
      http.post("/tasks"),
      flow("tasks.create", {
        do: async (_: unknown, fx) => {
          const run = ++runs;
          await fx.emit(task, { n: 1 });
          await fx.call(record, {});
          await fx.emit(task, { n: 2 });
          if (run === 1) {
            started.open();
            await hold.promise;
          }
          return { run, runId: fx.runId };
        },
      }),
    );
    const app = await apps.make([
      {
        create,
        record,
        w: on(task, flow("tasks.w", { do: (p: unknown) => void seen.push(p) })),
        a: on(audit, flow("tasks.a", { do: (p: unknown) => void seen.push(p) })),
      },
    ]);
    // The first request stalls past its lock (as a dead process's would lapse): a retry takes over.
    const first = app.request("/tasks", post({}, "key-8"));
    await started.promise;
    // Its emits are settled before the clock jumps: a message still in flight would lapse its 30 s
    // lease too and be delivered again (at least once), which is not what this case is about.
    await until(async () => seen.length === 3, "the first run's three messages delivered");
    await until(
      async () =>
        (await app.operator.stats("tasks.placed")).delivered === 2 &&
        (await app.operator.stats("tasks.audit")).delivered === 1,
      "the first run's messages settled",
    );
    app.time.advance(31_000);
    const retry = await app.request("/tasks", post({}, "key-8"));
    expect(retry.status).toBe(200);
    const { data } = (await retry.json()) as { data: { run: number; runId: string } };
    expect(data.run).toBe(2);
    expect((await app.store.getIdempotencyKey("key-8"))?.runId).toBe(data.runId);
    hold.open();
    expect((await first).status).toBe(200);
    await app.idle();
    expect(seen).toHaveLength(3);
    expect((await app.operator.stats("tasks.placed")).delivered).toBe(2);
    expect((await app.operator.stats("tasks.audit")).delivered).toBe(1);
  });

  it("answers before its completion is stored: a retry meanwhile gets the answer here, 409 elsewhere; stop waits for it", async () => {
    // The store's completions are held until the gate opens, as a slow round trip would hold them.
    const real = await apps.store();
    const held = gate();
    let completions = 0;
    const store = new Proxy(real, {
      get(target, prop) {
        if (prop === "completeIdempotencyKey")
          return async (req: Parameters<Store["completeIdempotencyKey"]>[0]) => {
            await held.promise;
            const outcome = await target.completeIdempotencyKey(req);
            completions++;
            return outcome;
          };
        const v: unknown = Reflect.get(target, prop, target);
        return typeof v === "function" ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      },
    });
    let runs = 0;
    const make = () =>
      apps.make(
        [{ create: on(http.post("/orders"), flow("orders.create", { do: () => ({ run: ++runs }) })) }],
        { store },
      );
    const app = await make();
    const other = await make();
    const first = await app.request("/orders", post({ sku: "a" }, "key-9"));
    expect(first.status).toBe(200);
    const body = await first.text();
    expect((await real.getIdempotencyKey("key-9"))?.status).toBe("running");
    // This instance holds the answer until it is stored; another instance finds the key running.
    const here = await app.request("/orders", post({ sku: "a" }, "key-9"));
    expect(here.headers.get("idempotent-replayed")).toBe("true");
    expect(await here.text()).toBe(body);
    expect((await app.request("/orders", post({ sku: "b" }, "key-9"))).status).toBe(422);
    const elsewhere = await other.request("/orders", post({ sku: "a" }, "key-9"));
    expect(elsewhere.status).toBe(409);
    expect(((await elsewhere.json()) as { error: { code: string } }).error.code).toBe("OKE1442");
    // stop() cannot return (and an owned store could not close) before the completion is stored.
    let stopped = false;
    const stopping = app.stop().then(() => (stopped = true));
    await until(() => app.readiness().ready === false, "stopping");
    expect(stopped).toBe(false);
    held.open();
    await stopping;
    expect(completions).toBe(1);
    expect((await real.getIdempotencyKey("key-9"))?.status).toBe("done");
    const after = await other.request("/orders", post({ sku: "a" }, "key-9"));
    expect(await after.text()).toBe(body);
    expect(after.headers.get("idempotent-replayed")).toBe("true");
    expect(runs).toBe(1);
  });

  it("app.emit with an id enqueues once, however often it is retried", async () => {
    const task = signal.once("tasks.charge");
    const seen: unknown[] = [];
    const w = on(task, flow("tasks.charge", { do: (p: unknown) => void seen.push(p) }));
    const app = await apps.make([{ task, w }]);
    await app.emit(task, { n: 1 }, { id: "charge-42" });
    await app.emit(task, { n: 1 }, { id: "charge-42" });
    await Promise.all([
      app.emit(task, { n: 2 }, { id: "charge-43" }),
      app.emit(task, { n: 2 }, { id: "charge-43" }),
    ]);
    await app.idle();
    // Delivered already: still known, still nothing new.
    await app.emit(task, { n: 1 }, { id: "charge-42" });
    await app.idle();
    expect(seen).toHaveLength(2);
    expect(seen).toContainEqual({ n: 1 });
    expect(seen).toContainEqual({ n: 2 });
    const stats = await app.operator.stats("tasks.charge");
    expect(stats.delivered).toBe(2);
    await expect(app.emit(task, {}, { id: "" })).rejects.toMatchObject({ code: "OKE1257" });
  });
});

describe.each(drivers)(
  "a keyed retry's durable run that another instance finished, on the $name driver",
  (driver) => {
    const apps = appFactory(driver);

    it("takes the finished run's outcome instead of answering 409 OKE1310 (the orphan scan won the race)", async () => {
      const store = await apps.store();
      const durable = on(
        http.post("/durable-orders"),
        flow("orders.durable", {
          durable: true,
          do: async (_: unknown, fx) => fx.step("place", () => "never"),
        }),
      );
      const app = await apps.make([{ durable }], { store });
      // What another instance's orphan scan left: the request's recorded run, finished meanwhile.
      await store.startRun({
        id: "run-k1",
        flow: "orders.durable",
        input: {},
        parentRunId: null,
        owner: "scan",
        now: 1_000_000,
        leaseMs: 30_000,
      });
      await store.finish({
        runId: "run-k1",
        owner: "scan",
        now: 1_000_001,
        status: "completed",
        output: { orderId: "run-k1" },
      });
      const request = { params: {}, query: {}, body: {}, headers: {} };
      const target = { method: "POST" as const, path: "/durable-orders", flow: "orders.durable" };
      await expect(app.invokeRoute(target, request, { runId: "run-k1" })).resolves.toEqual({
        kind: "returned",
        value: { orderId: "run-k1" },
      });
    });
  },
);
