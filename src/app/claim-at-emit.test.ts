// Claim at emit through the app on PostgreSQL: which path an emit took, and that nothing is lost either way.
import { afterEach, describe, expect, it } from "vitest";
import { gate, until } from "../../test/conformance/app-fixture.ts";
import {
  createApp,
  createTimeTravel,
  flow,
  http,
  on,
  signal,
  type OkeConfig,
  type TimeTravel,
} from "../index.ts";
import type { PostgresStoreOptions } from "../store/postgres/postgres-store.ts";
import { dropSchema, freshSchema, openStore } from "../store/postgres/test-support.ts";
import type { ClaimedMessage, Store } from "../store/types.ts";
import type { App } from "./types.ts";

/**
 * Claim at emit on PostgreSQL, through the app: which path an emit took is
 * read from a counting wrapper around the real store (every call still goes
 * to PostgreSQL), and from the message row itself.
 */
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()!();
});

interface Counted {
  store: Store;
  calls: { enqueue: number; enqueueClaimed: number };
  /** Ids of every message written, in call order. */
  ids: string[];
  /** What enqueueClaimed returned. */
  claimed: ClaimedMessage[];
}

function counting(store: Store): Counted {
  const calls = { enqueue: 0, enqueueClaimed: 0 };
  const ids: string[] = [];
  const claimed: ClaimedMessage[] = [];
  const wrapped: Store = Object.create(store) as Store;
  wrapped.enqueue = (messages, ...rest) => {
    calls.enqueue++;
    ids.push(...messages.map((m) => m.id));
    return store.enqueue(messages, ...rest);
  };
  wrapped.enqueueClaimed = async (messages, ...rest) => {
    calls.enqueueClaimed++;
    ids.push(...messages.map((m) => m.id));
    const got = await store.enqueueClaimed!(messages, ...rest);
    claimed.push(...got);
    return got;
  };
  return { store: wrapped, calls, ids, claimed };
}

async function pgStore(schema: string, extra: Partial<PostgresStoreOptions> = {}): Promise<Store> {
  const store = await openStore(schema, extra);
  cleanups.push(() => store.close());
  return store;
}

async function makeApp(
  store: Store,
  modules: Array<Record<string, unknown>>,
  opts: { config?: OkeConfig; time?: TimeTravel } = {},
): Promise<App> {
  const app = createApp({
    modules,
    env: "test",
    store,
    clock: opts.time ?? createTimeTravel(1_000_000),
    config: opts.config,
  });
  cleanups.push(() => app.stop({ timeoutMs: 500 }));
  await app.boot();
  return app;
}

async function schema(): Promise<string> {
  const name = freshSchema("cae");
  cleanups.push(() => dropSchema(name));
  return name;
}

/** A once signal whose handler holds until its gate opens, recording what it ran. */
function heldWorker(name: string, concurrency = 1) {
  const jobs = signal.once<{ n: number }>(name);
  const seen: Array<{ n: number; attempt: number }> = [];
  const gates = new Map<number, ReturnType<typeof gate>>();
  const hold = (n: number) => {
    let g = gates.get(n);
    if (!g) gates.set(n, (g = gate()));
    return g;
  };
  const worker = on(
    jobs,
    flow(`${name}.worker`, {
      do: async ({ n }: { n: number }, fx) => {
        seen.push({ n, attempt: fx.attempt });
        await hold(n).promise;
      },
    }),
  );
  return { jobs, seen, hold, exports: { jobs, worker }, config: { signals: { concurrency } } };
}

describe("claim at emit (postgres)", () => {
  it("an unkeyed emit with a free slot is written claimed by this instance and starts on the commit", async () => {
    const w = heldWorker("cae.free");
    const { store, calls, ids, claimed } = counting(await pgStore(await schema()));
    const app = await makeApp(store, [w.exports], { config: w.config });
    await app.emit(w.jobs, { n: 1 });
    expect(calls).toEqual({ enqueue: 0, enqueueClaimed: 1 });
    await until(() => w.seen.length === 1, "handler start");
    expect(claimed[0]!.lockedBy).toMatch(/:\d+:/); // the app's instance id: host:pid:suffix
    expect(await store.getMessage(ids[0]!)).toMatchObject({
      status: "inflight",
      attempts: 1,
      lockedBy: claimed[0]!.lockedBy,
    });
    w.hold(1).open(undefined);
    await until(async () => (await app.operator.stats("cae.free")).delivered === 1, "delivered");
    expect(w.seen).toEqual([{ n: 1, attempt: 1 }]);
  });

  it("with every slot taken the emit goes to the queue and runs when a slot frees", async () => {
    const w = heldWorker("cae.busy", 1);
    const { store, calls } = counting(await pgStore(await schema()));
    const app = await makeApp(store, [w.exports], { config: w.config });
    await app.emit(w.jobs, { n: 1 });
    await until(() => w.seen.length === 1, "first handler");
    await app.emit(w.jobs, { n: 2 });
    expect(calls).toEqual({ enqueue: 1, enqueueClaimed: 1 });
    w.hold(1).open(undefined);
    await until(() => w.seen.length === 2, "second handler");
    w.hold(2).open(undefined);
    await until(async () => (await app.operator.stats("cae.busy")).delivered === 2, "both delivered");
    expect(w.seen.map((s) => s.n)).toEqual([1, 2]);
  });

  it("keyed emits, and every emit with signals.claimAtEmit false, go through the queue", async () => {
    const keyed = heldWorker("cae.keyed");
    const a = counting(await pgStore(await schema()));
    const app = await makeApp(a.store, [keyed.exports], { config: keyed.config });
    await app.emit(keyed.jobs, { n: 1 }, { key: "k" });
    expect(a.calls).toEqual({ enqueue: 1, enqueueClaimed: 0 });
    keyed.hold(1).open(undefined);
    await until(async () => (await app.operator.stats("cae.keyed")).delivered === 1, "keyed delivered");

    const off = heldWorker("cae.off");
    const b = counting(await pgStore(await schema()));
    const app2 = await makeApp(b.store, [off.exports], {
      config: { signals: { concurrency: 1, claimAtEmit: false } },
    });
    await app2.emit(off.jobs, { n: 1 });
    expect(b.calls).toEqual({ enqueue: 1, enqueueClaimed: 0 });
    off.hold(1).open(undefined);
    await until(async () => (await app2.operator.stats("cae.off")).delivered === 1, "delivered");
  });

  it("fx.emit from an HTTP flow claims at emit too", async () => {
    const w = heldWorker("cae.fx");
    const place = on(
      http.post("/place"),
      flow("cae.place", {
        do: async (_: unknown, fx) => {
          await fx.emit(w.jobs, { n: 7 });
          return { ok: true };
        },
      }),
    );
    const { store, calls } = counting(await pgStore(await schema()));
    const app = await makeApp(store, [{ ...w.exports, place }], { config: w.config });
    const res = await app.request("/place", { method: "POST" });
    expect(res.status).toBe(200);
    expect(calls).toEqual({ enqueue: 0, enqueueClaimed: 1 });
    await until(() => w.seen.length === 1, "handler start");
    w.hold(7).open(undefined);
    await until(async () => (await app.operator.stats("cae.fx")).delivered === 1, "delivered");
  });

  it("a message claimed at emit by an instance that hangs is reclaimed by another once the lease lapses", async () => {
    const name = await schema();
    const time = createTimeTravel(1_000_000);
    // The other instance learns of the foreign lease on its poll tick (no NOTIFY is sent for it).
    const storeA = await pgStore(name);
    const storeB = await pgStore(name, { pollIntervalMs: 50 });
    const a = heldWorker("cae.crash");
    const b = heldWorker("cae.crash");
    // No prefetch: A's own lease timer must not re-claim the message into A's buffer.
    const config = { signals: { concurrency: 1, prefetch: 0, leaseMs: 10_000 } };
    const appA = await makeApp(storeA, [a.exports], { config, time });
    await makeApp(storeB, [b.exports], { config, time });
    await appA.emit(a.jobs, { n: 1 });
    await until(() => a.seen.length === 1, "A runs it");
    // A hangs as a whole: it claims nothing more, its handler still running. (A live pool frees a
    // hung handler's slot at the lease and may claim the message again itself.)
    await appA.stop({ timeoutMs: 0 });
    time.advance(10_000);
    await until(() => b.seen.length === 1, "B reclaims it");
    // A's stop marked its running claim as a graceful stop's: B runs it as the same attempt.
    expect(b.seen).toEqual([{ n: 1, attempt: 1 }]);
    b.hold(1).open(undefined);
    await until(async () => (await appA.operator.stats("cae.crash")).delivered === 1, "delivered by B");
    a.hold(1).open(undefined);
  });

  it("stop() waits for an emit whose claimed message is being committed, and runs it", async () => {
    const w = heldWorker("cae.stop");
    const { store, calls, ids } = counting(await pgStore(await schema()));
    const app = await makeApp(store, [w.exports], { config: w.config });
    const emitted = app.emit(w.jobs, { n: 1 });
    // Stop while the claimed write is on its way to PostgreSQL.
    await until(() => calls.enqueueClaimed === 1, "claimed write sent");
    const stopped = app.stop({ timeoutMs: 5_000 });
    await emitted;
    await until(() => w.seen.length === 1, "handler start");
    w.hold(1).open(undefined);
    await stopped;
    expect(await store.getMessage(ids[0]!)).toMatchObject({ status: "delivered", attempts: 1 });
  });
});
