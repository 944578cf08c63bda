// Once delivery through the app on every driver: retries, dead letters, keys, replay.
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { flow, http, on, signal, OkeError } from "../../src/index.ts";
import { appFactory, gate, until } from "./app-fixture.ts";
import { drivers } from "./drivers.ts";

describe.each(drivers)("signal.once on the $name driver", (driver) => {
  const apps = appFactory(driver);

  it("emit resolves once committed; exactly one worker runs the message", async () => {
    const task = signal.once("tasks.email", {
      schema: z.object({ to: z.string().email(), body: z.string() }),
    });
    const seen: string[] = [];
    const w = on(task, flow("workers.email", { do: ({ to }) => void seen.push(to) }));
    const app = await apps.make([{ task, w }], { boot: false });
    await app.emit(task, { to: "a@example.com", body: "hi" });
    // Committed before any worker exists.
    expect((await app.operator.stats("tasks.email")).pending).toBe(1);
    await app.boot();
    await app.idle();
    expect(seen).toEqual(["a@example.com"]);
    expect(await app.operator.stats("tasks.email")).toMatchObject({
      pending: 0,
      inflight: 0,
      delivered: 1,
      dead: 0,
    });
  });

  it("checks the schema at emit (OKE1250) and enqueues nothing", async () => {
    const task = signal.once("tasks.email", { schema: z.object({ to: z.string().email() }) });
    const w = on(task, flow("workers.email", { do: () => undefined }));
    const app = await apps.make([{ task, w }]);
    const err = await app.emit(task, { to: "not-an-email" }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OkeError);
    expect((err as OkeError).code).toBe("OKE1250");
    expect((err as OkeError).message).toMatch(/^"tasks\.email": to: /);
    expect((await app.operator.stats("tasks.email")).pending).toBe(0);
  });

  it("refuses an emit with no subscriber (OKE1240) naming the emitting flow, unless optional", async () => {
    const hook = signal.once("hooks.inbound");
    const optionalHook = signal.once("hooks.optional", { optional: true });
    const create = on(
      http.post("/create"),
      flow("orders.create", { do: async (_, fx) => fx.emit(hook, { id: "1" }) }),
    );
    const soft = on(
      http.post("/soft"),
      flow("orders.soft", { do: async (_, fx) => fx.emit(optionalHook, { id: "1" }) }),
    );
    const app = await apps.make([{ create, soft, hook, optionalHook }]);
    const res = await app.request("/create", { method: "POST" });
    const body = (await res.json()) as { error: { code: string; message: string } };
    expect(body.error).toMatchObject({
      code: "OKE1240",
      message: 'Flow "orders.create" emits signal "hooks.inbound" with no subscriber.',
    });
    expect((await app.request("/soft", { method: "POST" })).status).toBe(204);
  });

  it("stamps parentRunId from the producing run", async () => {
    const task = signal.once("tasks.child");
    let producerRun = "";
    const w = on(task, flow("workers.child", { do: () => undefined }));
    const p = on(
      http.post("/p"),
      flow("producer", {
        do: async (_, fx) => {
          producerRun = fx.runId;
          await fx.emit(task, {});
        },
      }),
    );
    const app = await apps.make([{ w, p }], { boot: false });
    await app.store.open();
    await app.request("/p", { method: "POST" });
    const [claimed] = await app.store.claim({
      signal: "tasks.child",
      worker: "t",
      max: 1,
      now: app.clock.now(),
      leaseMs: 1000,
    });
    expect(producerRun).not.toBe("");
    expect(claimed?.parentRunId).toBe(producerRun);
  });

  it("retries immediately, records each failure, then dead-letters after retries + 1 attempts", async () => {
    const task = signal.once("payments.sync", { retries: 2 });
    let calls = 0;
    const w = on(
      task,
      flow("payments.sync", {
        do: () => {
          calls++;
          throw new OkeError({ code: "PAY_DOWN", message: `provider down ${calls}` });
        },
      }),
    );
    const list = on(
      http.get("/dlq"),
      flow("ops.dlq", {
        effects: { reads: ["signal:payments.sync"] },
        do: async (_, fx) => fx.deadLetters(task),
      }),
    );
    const app = await apps.make([{ w, list }]);
    await app.emit(task, { chargeId: "ch_1" }, { key: "user-1" });
    await app.idle();
    expect(calls).toBe(3);
    const { data } = (await (await app.request("/dlq")).json()) as { data: Array<Record<string, unknown>> };
    expect(data).toHaveLength(1);
    const t = app.clock.now();
    expect(data[0]).toMatchObject({
      payload: { chargeId: "ch_1" },
      attempts: 3,
      key: "user-1",
      status: "dead",
      failures: [
        { code: "PAY_DOWN", message: "provider down 1", at: t, attempt: 1 },
        { code: "PAY_DOWN", message: "provider down 2", at: t, attempt: 2 },
        { code: "PAY_DOWN", message: "provider down 3", at: t, attempt: 3 },
      ],
    });
    expect(typeof data[0]!.createdAt).toBe("number");
  });

  it("deadLetter: false marks the exhausted message delivered and keeps the DLQ empty", async () => {
    const task = signal.once("metrics.push", { retries: 1, deadLetter: false });
    let calls = 0;
    const w = on(
      task,
      flow("metrics.push", {
        do: () => {
          calls++;
          throw new Error("nope");
        },
      }),
    );
    const app = await apps.make([{ w }]);
    await app.emit(task, { n: 1 });
    await app.idle();
    expect(calls).toBe(2);
    expect(await app.deadLetters(task)).toEqual([]);
    expect(await app.operator.stats("metrics.push")).toMatchObject({ delivered: 1, dead: 0 });
  });

  it("per-key FIFO: one key runs in emit order and never overlaps; other keys run in parallel", async () => {
    const task = signal.once("jobs.keyed");
    const order: Record<string, number[]> = {};
    const running = new Map<string, number>();
    let overlapSameKey = false;
    let maxParallel = 0;
    let active = 0;
    const w = on(
      task,
      flow("jobs.keyed", {
        do: async ({ k, n }: { k: string; n: number }) => {
          active++;
          maxParallel = Math.max(maxParallel, active);
          if ((running.get(k) ?? 0) > 0) overlapSameKey = true;
          running.set(k, (running.get(k) ?? 0) + 1);
          await new Promise((r) => setImmediate(r));
          (order[k] ??= []).push(n);
          running.set(k, running.get(k)! - 1);
          active--;
        },
      }),
    );
    const app = await apps.make([{ w }], { config: { signals: { concurrency: 8 } } });
    // Emit order is commit order: each key's emits are sequential, the keys run side by side.
    await Promise.all(
      ["a", "b", "c"].map(async (k) => {
        for (let n = 0; n < 15; n++) await app.emit(task, { k, n }, { key: k });
      }),
    );
    await app.idle();
    for (const k of ["a", "b", "c"]) expect(order[k]).toEqual([...Array(15).keys()]);
    expect(overlapSameKey).toBe(false);
    expect(maxParallel).toBeGreaterThan(1);
  });

  it("a failed message of a key retries before its successors", async () => {
    const task = signal.once("jobs.retry-order", { retries: 2 });
    const log: string[] = [];
    let failedOnce = false;
    const w = on(
      task,
      flow("jobs.retry-order", {
        do: ({ n }: { n: number }) => {
          if (n === 1 && !failedOnce) {
            failedOnce = true;
            log.push("1:fail");
            throw new Error("first try");
          }
          log.push(`${n}:ok`);
        },
      }),
    );
    const app = await apps.make([{ w }], { boot: false });
    for (const n of [1, 2, 3]) await app.emit(task, { n }, { key: "k" });
    await app.boot();
    await app.idle();
    expect(log).toEqual(["1:fail", "1:ok", "2:ok", "3:ok"]);
  });

  it("reclaims an expired lease lazily on the next claim; the late holder's settle changes nothing", async () => {
    const task = signal.once("jobs.slow", { retries: 1 });
    const first = gate();
    const attempts: number[] = [];
    const w = on(
      task,
      flow("jobs.slow", {
        do: async (_, fx) => {
          attempts.push(fx.attempt);
          if (fx.attempt === 1) {
            await first.promise;
            throw new Error("late failure after losing the lease");
          }
        },
      }),
    );
    const app = await apps.make([{ w }], { config: { signals: { leaseMs: 30_000 } } });
    await app.emit(task, {});
    await until(() => attempts.length === 1, "first attempt");
    expect((await app.operator.stats("jobs.slow")).inflight).toBe(1);
    app.time.advance(29_999);
    await new Promise((r) => setImmediate(r));
    expect(attempts).toEqual([1]);
    app.time.advance("1ms"); // the lease timer fires and the next claim takes the message again
    await until(() => attempts.length === 2, "reclaim");
    await until(async () => (await app.operator.stats("jobs.slow")).delivered === 1, "second holder settles");
    first.open(); // the first holder fails late: fenced, the message stays delivered
    await app.idle();
    expect(attempts).toEqual([1, 2]);
    expect(await app.operator.stats("jobs.slow")).toMatchObject({
      delivered: 1,
      dead: 0,
      pending: 0,
      inflight: 0,
    });
  });

  it("replicas of one flow on one store compete: each message runs once", async () => {
    const task = signal.once("jobs.shared");
    const seen = new Map<number, number>();
    const w = on(
      task,
      flow("jobs.shared", { do: ({ n }: { n: number }) => void seen.set(n, (seen.get(n) ?? 0) + 1) }),
    );
    const store = await apps.store();
    const a = await apps.make([{ w }], { store });
    const b = await apps.make([{ w }], { store, time: a.time });
    await Promise.all(Array.from({ length: 100 }, (_, n) => (n % 2 ? a : b).emit(task, { n })));
    await until(async () => (await a.operator.stats("jobs.shared")).delivered === 100, "all delivered");
    await Promise.all([a.idle(), b.idle()]);
    expect(seen.size).toBe(100);
    expect([...seen.values()].every((c) => c === 1)).toBe(true);
  });

  it("operators list, replay (delivered exactly once more) and discard dead letters; stats count them", async () => {
    const task = signal.once("tasks.flaky", { retries: 0 });
    let healthy = false;
    const runs: number[] = [];
    const w = on(
      task,
      flow("tasks.flaky", {
        do: ({ n }: { n: number }) => {
          runs.push(n);
          if (!healthy) throw new Error("down");
        },
      }),
    );
    const app = await apps.make([{ w }]);
    await app.emit(task, { n: 1 });
    await app.emit(task, { n: 2 });
    await app.idle();
    const dead = await app.operator.deadLetters("tasks.flaky");
    expect(dead.map((d) => d.payload)).toEqual([{ n: 1 }, { n: 2 }]);
    expect(await app.operator.stats("tasks.flaky")).toMatchObject({ dead: 2, pending: 0 });
    healthy = true;
    expect(await app.operator.replay("tasks.flaky", [dead[0]!.id])).toEqual([dead[0]!.id]);
    await app.idle();
    expect(runs).toEqual([1, 2, 1]);
    expect(await app.operator.discard("tasks.flaky", "all")).toEqual([dead[1]!.id]);
    expect(await app.operator.stats("tasks.flaky")).toMatchObject({ dead: 0, delivered: 1, pending: 0 });
    expect(await app.operator.deadLetters("tasks.flaky")).toEqual([]);
  });

  it("reports the age of the oldest pending message", async () => {
    const task = signal.once("tasks.later", { optional: true });
    const app = await apps.make([{ task }]);
    await app.emit(task, {});
    app.time.advance("5s");
    expect(await app.operator.stats("tasks.later")).toMatchObject({ pending: 1, oldestPendingAgeMs: 5_000 });
  });

  it("fx.deadLetters needs a bound signal runtime", async () => {
    const lonely = signal.once("tasks.lonely", { optional: true });
    const peek = on(
      http.get("/peek"),
      flow("ops.peek", {
        effects: { reads: ["signal:tasks.lonely"] },
        do: async (_, fx) => fx.deadLetters(lonely),
      }),
    );
    const app = await apps.make([{ peek, lonely }]);
    const body = (await (await app.request("/peek")).json()) as { error: { message: string } };
    expect(body.error.message).toBe("fx.deadLetters requires a bound signal runtime");
  });

  it("graceful stop waits for in-flight handlers, and leaves unfinished ones to lazy reclaim", async () => {
    const task = signal.once("jobs.stop");
    const release = gate();
    let finished = 0;
    const w = on(
      task,
      flow("jobs.stop", {
        do: async () => {
          await release.promise;
          finished++;
        },
      }),
    );
    const store = await apps.store();
    const app = await apps.make([{ w }], { store });
    await app.emit(task, {});
    await until(async () => (await app.operator.stats("jobs.stop")).inflight === 1, "claimed");
    const stopping = app.stop({ timeoutMs: 5_000 });
    release.open();
    await stopping;
    expect(finished).toBe(1);
    expect(await store.stats("jobs.stop", app.clock.now())).toMatchObject({ delivered: 1, inflight: 0 });

    const stuck = gate();
    const w2 = on(task, flow("jobs.stop", { do: async () => stuck.promise }));
    const app2 = await apps.make([{ w2 }], { store, time: app.time });
    await app2.emit(task, {});
    await until(
      async () => (await store.stats("jobs.stop", app2.clock.now())).inflight === 1,
      "claimed again",
    );
    await app2.stop({ timeoutMs: 10 });
    expect((await store.stats("jobs.stop", app2.clock.now())).inflight).toBe(1);
    stuck.open();
  });
});

describe.each(drivers)("prefetch on the $name driver", (driver) => {
  const apps = appFactory(driver);

  it("a prefetched message whose lease ran out while it waited is not run late; it is reclaimed and runs once", async () => {
    const task = signal.once("jobs.prefetch");
    const first = gate();
    const runs: Array<{ n: number; attempt: number }> = [];
    const w = on(
      task,
      flow("jobs.prefetch", {
        do: async ({ n }: { n: number }, fx) => {
          runs.push({ n, attempt: fx.attempt });
          if (n === 1) await first.promise;
        },
      }),
    );
    const app = await apps.make([{ w }], {
      boot: false,
      config: { signals: { concurrency: 1, prefetch: 1, leaseMs: 1_000 } },
    });
    await app.emit(task, { n: 1 });
    await app.emit(task, { n: 2 });
    await app.boot();
    await until(() => runs.length === 1, "first message running, second held");
    app.time.advance("2s"); // both leases run out; n=1 is reclaimed by the next claim too
    first.open();
    await until(async () => (await app.operator.stats("jobs.prefetch")).delivered === 2, "both delivered");
    await app.idle();
    const second = runs.filter((r) => r.n === 2);
    expect(second).toHaveLength(1);
    expect(second[0]!.attempt).toBe(2);
  });
});
