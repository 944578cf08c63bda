// Broadcast across the fleet on every driver: each bound flow runs each event once, wherever it runs.
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { flow, on, signal, OkeError } from "../../src/index.ts";
import { BROADCAST_PHYSICS, broadcastQueue } from "../../src/signal/broadcast-runtime.ts";
import type { Store } from "../../src/store/types.ts";
import { appFactory, gate, recordingLogger, until } from "./app-fixture.ts";
import { drivers } from "./drivers.ts";

/** Two flows on one broadcast signal, recording which flow ran which event where. */
function fanout(name: string) {
  const placed = signal.broadcast(name, { schema: z.object({ id: z.string() }) });
  const seen: string[] = [];
  const charge = on(placed, flow(`${name}.charge`, { do: ({ id }) => void seen.push(`charge ${id}`) }));
  const ship = on(placed, flow(`${name}.ship`, { do: ({ id }) => void seen.push(`ship ${id}`) }));
  return { placed, seen, charge, ship };
}

/** The store with every call failing while `down` (events still flow): an outage both apps see. */
function outageStore(store: Store): { store: Store; setDown(down: boolean): void; failures: () => number } {
  let down = false;
  let failures = 0;
  const wrapped = new Proxy(store, {
    get(target, prop, receiver) {
      const v: unknown = Reflect.get(target, prop, receiver);
      // Synchronous reads (health, the outage classifier) answer as the store does: only calls fail.
      if (
        typeof v !== "function" ||
        prop === "subscribe" ||
        prop === "close" ||
        prop === "health" ||
        prop === "isUnavailable"
      )
        return v;
      return (...args: unknown[]): unknown => {
        if (down) {
          failures++;
          return Promise.reject(new Error("store unreachable (test outage)"));
        }
        return (v as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  return { store: wrapped, setDown: (d) => void (down = d), failures: () => failures };
}

describe.each(drivers)("signal.broadcast on the $name driver", (driver) => {
  const apps = appFactory(driver);

  it("every bound flow runs each event once, across two replicas sharing the store", async () => {
    const { placed, seen, charge, ship } = fanout("orders.placed");
    const store = await apps.store();
    const a = await apps.make([{ placed, charge, ship }], { store });
    const b = await apps.make([{ placed, charge, ship }], { store, time: a.time });
    for (let i = 0; i < 5; i++) await (i % 2 === 0 ? a : b).emit(placed, { id: `o${i}` });
    await until(() => seen.length >= 10, "10 handler runs");
    await a.idle();
    await b.idle();
    const expected = [0, 1, 2, 3, 4].flatMap((i) => [`charge o${i}`, `ship o${i}`]).sort();
    expect(seen.sort()).toEqual(expected);
  });

  it("a flow only another instance runs gets the events emitted here", async () => {
    const placed = signal.broadcast("orders.remote");
    const seen: string[] = [];
    const remote = on(
      placed,
      flow("orders.remote.audit", { do: (p: { id: string }) => void seen.push(p.id) }),
    );
    const store = await apps.store();
    const b = await apps.make([{ placed, remote }], { store });
    // A binds nothing: the fleet's subscriber (B) is why its emit is not an orphan.
    const a = await apps.make([{ placed }], { store, time: b.time });
    await a.emit(placed, { id: "x1" });
    await until(() => seen.length === 1, "B's flow ran");
    await b.idle();
    expect(seen).toEqual(["x1"]);
  });

  it("checks the schema at emit (OKE1250) and refuses an orphan emit (OKE1240) unless optional", async () => {
    const { placed, charge } = fanout("orders.checked");
    const lonely = signal.broadcast("orders.lonely");
    const soft = signal.broadcast("orders.soft", { optional: true });
    const app = await apps.make([{ placed, charge, lonely, soft }]);
    const bad = await app.emit(placed, { id: 7 } as never).catch((e: unknown) => e);
    expect(bad).toBeInstanceOf(OkeError);
    expect((bad as OkeError).code).toBe("OKE1250");
    const orphan = await app.emit(lonely, {}).catch((e: unknown) => e);
    expect((orphan as OkeError).code).toBe("OKE1240");
    await app.emit(soft, {});
  });

  it("a handler failure is logged with the flow and event id and not retried", async () => {
    const boom = signal.broadcast("orders.boom");
    let runs = 0;
    const f = on(
      boom,
      flow("orders.boom.fails", {
        do: () => {
          runs++;
          throw new Error("card declined");
        },
      }),
    );
    const { logger, records } = recordingLogger();
    const app = await apps.make([{ boom, f }], { logger });
    await app.emit(boom, {});
    await until(
      () => records.some((r) => r.msg === "broadcast handler failed: card declined"),
      "failure log",
    );
    await app.idle();
    expect(runs).toBe(1);
    const rec = records.find((r) => r.msg === "broadcast handler failed: card declined")!;
    expect(rec).toMatchObject({ flow: "orders.boom.fails", signal: "orders.boom" });
    expect(typeof rec.eventId).toBe("string");
    // The line carries where the handler threw, and it is the only one: no pool "attempt 1 failed".
    expect(String((rec.err as { stack?: unknown } | undefined)?.stack)).toContain("card declined");
    expect(records.filter((r) => /card declined/.test(String(r.msg)))).toHaveLength(1);
    // Ephemeral: the copy is done, never dead-lettered; counted as failed among the delivered.
    const stats = await app.store.stats(broadcastQueue("orders.boom", "orders.boom.fails"), app.clock.now());
    expect(stats).toMatchObject({ pending: 0, inflight: 0, dead: 0, delivered: 1, deliveredFailed: 1 });
  });

  it("a durable emitter journals the broadcast with its step: a resumed run does not emit again", async () => {
    const { placed, seen, charge, ship } = fanout("orders.durable");
    const emitter = flow("orders.durable.emitter", {
      durable: true,
      do: async (_: undefined, fx) => {
        await fx.emit(placed, { id: "d1" });
        await fx.clock.sleep("cool-off", "1m");
        return "done";
      },
    });
    const app = await apps.make([{ placed, charge, ship, emitter }]);
    await app.invoke(emitter, undefined);
    await until(() => seen.length === 2, "both flows ran");
    app.time.advance("2m");
    await until(async () => (await app.operator.runs({ status: "completed" })).length === 1, "run completed");
    await app.idle();
    expect(seen.sort()).toEqual(["charge d1", "ship d1"]);
  });

  it("an event waits for a restarting subscriber up to MAX_WAIT_MS, and is missed after", async () => {
    const { placed, seen, charge, ship } = fanout("orders.restart");
    const store = await apps.store();
    const emitter = await apps.make([{ placed, charge, ship }], { store, boot: false });
    // Nobody runs the flows yet, but the emitter's own bindings count: the copies wait in the queue.
    await emitter.emit(placed, { id: "early" });
    emitter.time.advance(BROADCAST_PHYSICS.MAX_WAIT_MS - 1_000);
    await emitter.emit(placed, { id: "fresh" });
    emitter.time.advance(2_000);
    await emitter.boot();
    await until(() => seen.length >= 2, "fresh copies ran");
    await emitter.idle();
    expect(seen.sort()).toEqual(["charge fresh", "ship fresh"]);
    // The missed copies are recorded as failed, not plainly delivered: the Console counts them.
    for (const f of ["charge", "ship"]) {
      const queue = broadcastQueue("orders.restart", `orders.restart.${f}`);
      await until(
        async () => (await store.stats(queue, emitter.clock.now())).delivered === 2,
        `${f} settled`,
      );
      expect(await store.stats(queue, emitter.clock.now())).toMatchObject({
        delivered: 2,
        deliveredFailed: 1,
      });
      const [missed] = (
        await store.pageMessages({ signal: queue, status: "delivered", limit: 10 })
      ).items.filter((m) => m.failures.length > 0);
      expect(missed!.payload).toEqual({ id: "early" });
      expect(missed!.failures).toEqual([
        {
          code: "MISSED",
          message: `missed: the event waited 31 s for "orders.restart.${f}", over the 30 s a broadcast copy waits; not run`,
          at: expect.any(Number),
          attempt: 1,
        },
      ]);
    }
  });

  it("copies for a flow whose every subscriber lapsed are cleared; then the emit is an orphan", async () => {
    const placed = signal.broadcast("orders.gone");
    const g = on(placed, flow("orders.gone.audit", { do: () => undefined }));
    const store = await apps.store();
    const b = await apps.make([{ placed, g }], { store });
    const a = await apps.make([{ placed }], { store, time: b.time });
    await b.stop();
    // B stopped without a word: for SUBSCRIBER_TTL_MS it still counts, and its copies wait.
    await a.emit(placed, {});
    const queue = broadcastQueue("orders.gone", "orders.gone.audit");
    expect((await store.stats(queue, a.clock.now())).pending).toBe(1);
    a.time.advance(BROADCAST_PHYSICS.SUBSCRIBER_TTL_MS + BROADCAST_PHYSICS.HEARTBEAT_MS);
    await until(
      async () => (await store.stats(queue, a.clock.now())).delivered === 1,
      "janitor cleared the copy",
    );
    // Not run, so not plainly delivered: recorded as MISSED, and counted among the failed.
    expect(await store.stats(queue, a.clock.now())).toMatchObject({ delivered: 1, deliveredFailed: 1 });
    const [cleared] = (await store.pageMessages({ signal: queue, status: "delivered", limit: 10 })).items;
    expect(cleared!.failures).toEqual([
      {
        code: "MISSED",
        message:
          'missed: no running instance binds "orders.gone.audit" any more (its last one stopped heartbeating); not run',
        at: expect.any(Number),
        attempt: 1,
      },
    ]);
    const err = await a.emit(placed, {}).catch((e: unknown) => e);
    expect((err as OkeError).code).toBe("OKE1240");
  });

  it("copies missed after a long wait are logged once per flow at warn, the rest of the window at debug", async () => {
    const { placed, seen, charge, ship } = fanout("orders.backlog");
    const { logger, records } = recordingLogger();
    const store = await apps.store();
    const emitter = await apps.make([{ placed, charge, ship }], { store, boot: false, logger });
    for (let i = 0; i < 4; i++) await emitter.emit(placed, { id: `old${i}` });
    emitter.time.advance(BROADCAST_PHYSICS.MAX_WAIT_MS + 1_000);
    await emitter.boot();
    const queues = ["charge", "ship"].map((f) => broadcastQueue("orders.backlog", `orders.backlog.${f}`));
    await until(
      async () =>
        (await Promise.all(queues.map((q) => store.stats(q, emitter.clock.now())))).every(
          (st) => st.deliveredFailed === 4,
        ),
      "every copy missed",
    );
    const missed = (level: number) =>
      records.filter(
        (r) => r.msg === "broadcast: event waited too long for this flow; missed" && r.level === level,
      );
    // One warn line per flow, the other three copies of each at debug; none ran.
    expect(
      missed(40)
        .map((r) => r.flow)
        .sort(),
    ).toEqual(["orders.backlog.charge", "orders.backlog.ship"]);
    expect(missed(20)).toHaveLength(6);
    expect(seen).toEqual([]);
  });

  it("copies an instance claimed but never started run on the other replica when it dies", async () => {
    const placed = signal.broadcast("orders.crash");
    const startedOnA: string[] = [];
    const ranOnB: string[] = [];
    const hang = gate();
    const onA = on(
      placed,
      flow("orders.crash.slow", {
        do: async ({ id }: { id: string }) => {
          startedOnA.push(id);
          await hang.promise;
        },
      }),
    );
    const onB = on(
      placed,
      flow("orders.crash.slow", { do: ({ id }: { id: string }) => void ranOnB.push(id) }),
    );
    const config = { signals: { concurrency: 2, prefetch: 4, leaseMs: 10_000 } };
    const store = await apps.store();
    const a = await apps.make([{ placed, onA }], { store, config });
    const ids = ["c0", "c1", "c2", "c3", "c4", "c5", "c6", "c7"];
    for (const id of ids) await a.emit(placed, { id });
    await until(() => startedOnA.length === 2, "A's two slots busy");
    // A's claim is in (a prefetching pool took concurrency + prefetch copies in it).
    await until(
      async () =>
        (await store.stats(broadcastQueue("orders.crash", "orders.crash.slow"), a.clock.now())).inflight >= 2,
      "A's claims",
    );
    // A dies: its handlers never end, and nothing it held is released (stop with no time to finish).
    await a.stop({ timeoutMs: 0 });
    const { logger, records } = recordingLogger();
    const b = await apps.make([{ placed, onB }], { store, config, time: a.time, logger });
    const queue = broadcastQueue("orders.crash", "orders.crash.slow");
    // B takes what nobody holds at once...
    await until(
      async () => (await store.stats(queue, b.clock.now())).pending === 0,
      "B took the free copies",
    );
    await b.idle();
    // ...and A's claims once their lease ran out.
    a.time.advance(config.signals.leaseMs + 1_000);
    await until(async () => {
      const st = await store.stats(queue, b.clock.now());
      return st.pending === 0 && st.inflight === 0;
    }, "every copy settled");
    await b.idle();
    // Each event ran once across the fleet: what A started is not run again, the rest ran on B.
    expect([...startedOnA, ...ranOnB].sort()).toEqual(ids);
    expect(ranOnB.filter((id) => startedOnA.includes(id))).toEqual([]);
    const cut = records.filter((r) => String(r.msg).includes("a handler was cut off"));
    expect(cut).toHaveLength(startedOnA.length);
    // Nothing on B blames a crash or hang for a copy (the once text for a spent claim).
    expect(records.filter((r) => /did not finish within its lease/.test(String(r.msg)))).toEqual([]);
    // The cut-off copies are recorded as failed, for the attempt that was cut off; one line each.
    expect((await store.stats(queue, b.clock.now())).deliveredFailed).toBe(startedOnA.length);
    const failed = (
      await store.pageMessages({ signal: queue, status: "delivered", limit: 100 })
    ).items.filter((m) => m.failures.length > 0);
    expect(failed.map((m) => (m.payload as { id: string }).id).sort()).toEqual([...startedOnA].sort());
    for (const m of failed)
      expect(m.failures).toEqual([
        {
          code: "LEASE_EXPIRED",
          message: `cut off: the handler of "orders.crash.slow" started on an instance that stopped or died, or outlived its lease (10 s); a broadcast copy is not run again`,
          at: expect.any(Number),
          attempt: 1,
        },
      ]);
    expect(records.filter((r) => /^attempt \d+ failed/.test(String(r.msg)))).toEqual([]);
    hang.open();
  });

  it("after a store outage the fleet's flows still count, and members re-announce at once", async () => {
    const placed = signal.broadcast("orders.outage", { optional: true });
    const seen: string[] = [];
    const remote = on(
      placed,
      flow("orders.outage.audit", { do: ({ id }: { id: string }) => void seen.push(id) }),
    );
    const faulty = outageStore(await apps.store());
    const b = await apps.make([{ placed, remote }], { store: faulty.store });
    // A binds nothing: only B runs the flow.
    const a = await apps.make([{ placed }], { store: faulty.store, time: b.time });
    await a.emit(placed, { id: "before" });
    await until(() => seen.includes("before"), "B ran the event emitted before the outage");
    faulty.setDown(true);
    // 20 s without a store: every heartbeat fails and B's entry expires (TTL 15 s).
    for (let i = 0; i < 4; i++) {
      const failed = faulty.failures();
      b.time.advance(BROADCAST_PHYSICS.HEARTBEAT_MS);
      await until(() => faulty.failures() > failed, "a failed heartbeat");
    }
    faulty.setDown(false);
    // Emits right after the store is back, before B's next heartbeat: B's flow still counts.
    for (const id of ["r1", "r2", "r3"]) await a.emit(placed, { id });
    await until(
      () => ["r1", "r2", "r3"].every((id) => seen.includes(id)),
      "B ran the emits made on recovery",
    );
    // B re-announces within RETRY_MS, not a full heartbeat later.
    b.time.advance(BROADCAST_PHYSICS.RETRY_MS);
    await until(async () => {
      const live = await faulty.store.liveSubscriptions(b.clock.now());
      return live.some((s) => s.flow === "orders.outage.audit");
    }, "B's subscription announced again");
    await b.idle();
    expect(seen.sort()).toEqual(["before", "r1", "r2", "r3"]);
  });
});
