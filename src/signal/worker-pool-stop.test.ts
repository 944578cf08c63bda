// WorkerPool.stop: once it stopped waiting, nothing starts — not a buffered message, not a late claim's — and those are given back.
import { afterEach, describe, expect, it } from "vitest";
import { gate, gatedStore, recordingLogger, until } from "../../test/conformance/app-fixture.ts";
import { createTimeTravel } from "../clock/time-travel.ts";
import { createMemoryStore } from "../store/memory/memory-store.ts";
import type { ClaimedMessage, Store } from "../store/types.ts";
import { signal } from "./signal.ts";
import { WorkerPool, type HandlerOutcome } from "./worker-pool.ts";

const T0 = 1_000_000;
const SIGNAL = "pool.stop";

/**
 * The hand-off of Store.settle as postgres does it (memory ignores it): after the settle, the
 * settling worker claims up to `max` messages in the same call.
 */
function withHandoff(store: Store): Store {
  return new Proxy(store, {
    get(target, prop, receiver) {
      if (prop !== "settle") return Reflect.get(target, prop, receiver) as unknown;
      const settle: Store["settle"] = async (settlements, now, handoff) => {
        const r = await target.settle(settlements, now);
        if (handoff === undefined) return r;
        const claimed = await target.claim({
          signal: SIGNAL,
          worker: handoff.worker,
          max: handoff.max,
          now,
          leaseMs: handoff.leaseMs,
        });
        return { ...r, claimed };
      };
      return settle;
    },
  });
}

/**
 * Makes `store.leaveClaimsToLease` commit at once but answer only when the test opens `answer`:
 * a handler can then end between the mark and the pool hearing of it.
 */
function answeredLate(store: Store): { readonly committed: boolean; answer: ReturnType<typeof gate<void>> } {
  const leave = store.leaveClaimsToLease!.bind(store);
  const state = { committed: false, answer: gate<void>() };
  store.leaveClaimsToLease = async (claims, now) => {
    const ids = await leave(claims, now);
    state.committed = true;
    await state.answer.promise;
    return ids;
  };
  return state;
}

/** Lets every promise callback queued so far run (one macrotask), no wall-clock wait. */
const turn = (): Promise<void> => new Promise((r) => setImmediate(r));

describe("WorkerPool.stop", () => {
  const closers: Array<() => Promise<void>> = [];
  afterEach(async () => {
    while (closers.length > 0) await closers.pop()!();
  });

  async function setup(o: {
    method?: keyof Store;
    retries?: number;
    concurrency?: number;
    handoff?: boolean;
    handle: (m: ClaimedMessage) => Promise<HandlerOutcome>;
  }) {
    const raw = createMemoryStore();
    await raw.open();
    closers.push(() => raw.close());
    const { store, state } = gatedStore(o.handoff === true ? withHandoff(raw) : raw, o.method ?? "claim");
    const { logger, records } = recordingLogger();
    const once = signal.once(SIGNAL, { retries: o.retries ?? 3 });
    const poolOn = (
      s: Store,
      worker: string,
      handle: (m: ClaimedMessage) => Promise<HandlerOutcome>,
      at = T0,
    ) =>
      new WorkerPool({
        store: s,
        clock: createTimeTravel(at),
        logger,
        signal: once,
        worker,
        concurrency: o.concurrency ?? 1,
        prefetch: 1,
        leaseMs: 30_000,
        ...(o.handoff === undefined ? {} : { handoff: o.handoff }),
        handle,
      });
    const pool = poolOn(store, "w1", o.handle);
    /** Another instance's pool on the same store (its clock at `at`), started; stopped after the case. */
    const other = (handle: (m: ClaimedMessage) => Promise<HandlerOutcome>, at = T0) => {
      const p = poolOn(raw, "w2", handle, at);
      p.start();
      closers.push(() => p.stop(0));
      return p;
    };
    const emit = (id: string, key: string | null = null) =>
      raw.enqueue([{ id, signal: SIGNAL, key, payload: null, parentRunId: null }], T0);
    return { raw, pool, other, state, records, emit };
  }

  const givenBack = (what: string, ids: string[]) =>
    expect.objectContaining({
      level: 40,
      messageIds: ids,
      msg: `${what}: not run here; given back unstarted, so they are claimed at once, their attempt not counted`,
    });

  it("a handler that ends after the deadline does not start the buffered message behind it", async () => {
    const ran: string[] = [];
    const hung = gate<HandlerOutcome>();
    const t = await setup({
      handle: (m) => {
        ran.push(m.id);
        return m.id === "m1" ? hung.promise : Promise.resolve({ kind: "ok" });
      },
    });
    await t.emit("m1");
    await t.emit("m2");
    t.pool.start();
    // One claim took both: m1 runs in the one slot, m2 waits in the buffer.
    await until(() => ran.length === 1 && t.pool.leftIds().length === 2, "m1 running, m2 buffered");
    await t.pool.stop(0); // m1 is still running: the deadline ends the wait
    hung.open({ kind: "ok" });
    await until(async () => (await t.raw.getMessage("m1"))?.status === "delivered", "m1's settle");
    await turn();

    expect(ran).toEqual(["m1"]);
    // Given back by stop() itself, as if never claimed: not left to its lease.
    expect(await t.raw.getMessage("m2")).toMatchObject({ status: "pending", attempts: 0, lockedBy: null });
    expect(t.records).toContainEqual(
      givenBack("shutdown deadline: buffered message(s) claimed ahead of a free slot were not started", [
        "m2",
      ]),
    );
  });

  it("a buffered message given back at stop runs at once on another pool as the same attempt, even its last", async () => {
    // retries 0: a message left to its lease came back spent and was settled dead without running.
    const hung = gate<HandlerOutcome>();
    const t = await setup({
      retries: 0,
      handle: (m) => (m.id === "m1" ? hung.promise : Promise.resolve({ kind: "ok" })),
    });
    await t.emit("m1");
    await t.emit("m2");
    t.pool.start();
    await until(() => t.pool.active === 1 && t.pool.leftIds().length === 2, "m1 running, m2 buffered");
    await t.pool.stop(0);
    expect(await t.raw.getMessage("m2")).toMatchObject({ status: "pending", attempts: 0, lockedBy: null });
    const ran: ClaimedMessage[] = [];
    t.other((m) => {
      ran.push(m);
      return Promise.resolve({ kind: "ok" });
    });
    // No clock moves: without the give-back, m2's lease (30 s) would keep it from the other pool.
    await until(async () => (await t.raw.getMessage("m2"))?.status === "delivered", "m2 delivered by w2");
    expect(ran).toMatchObject([{ id: "m2", attempts: 1, lockedBy: "w2" }]);
    expect(await t.raw.getMessage("m2")).toMatchObject({ status: "delivered", attempts: 1, failures: [] });
    hung.open({ kind: "ok" });
  });

  it("a give-back the store refuses leaves the messages to their lease, logged with their ids", async () => {
    const hung = gate<HandlerOutcome>();
    const t = await setup({
      method: "releaseClaimed",
      handle: (m) => (m.id === "m1" ? hung.promise : Promise.resolve({ kind: "ok" })),
    });
    await t.emit("m1");
    await t.emit("m2");
    t.pool.start();
    await until(() => t.pool.active === 1 && t.pool.leftIds().length === 2, "m1 running, m2 buffered");
    t.state.failing = true;
    await t.pool.stop(0);
    expect(t.state.waiting).toBe(1);
    expect(await t.raw.getMessage("m2")).toMatchObject({ status: "inflight", attempts: 1, lockedBy: "w1" });
    expect(t.records).toContainEqual(
      expect.objectContaining({
        level: 40,
        messageIds: ["m2"],
        msg: "shutdown deadline: buffered message(s) claimed ahead of a free slot were not started: not run here; giving them back failed, so they are claimed again once their lease (30 s) lapses",
      }),
    );
    hung.open({ kind: "ok" });
  });

  it("a keyed message a settle hands off after stop is given back, still its key's head", async () => {
    const t = await setup({ method: "settle", handoff: true, handle: () => Promise.resolve({ kind: "ok" }) });
    await t.emit("k1", "k");
    await t.emit("k2", "k");
    t.state.gated = true;
    t.pool.start();
    // k1 ran; its settle (which hands k2 to this pool) waits at the store.
    await until(() => t.state.waiting === 1, "k1's settle sent");
    const stopping = t.pool.stop(0);
    t.state.gate.open();
    await stopping;
    expect(await t.raw.getMessage("k1")).toMatchObject({ status: "delivered" });
    expect(await t.raw.getMessage("k2")).toMatchObject({ status: "pending", attempts: 0, lockedBy: null });
    expect(t.records).toContainEqual(
      givenBack("a settle sent before stop handed this pool 1 message(s) after it", ["k2"]),
    );
  });

  it("a claim in flight that answers after the deadline starts nothing; its messages are given back, claimable at once by another pool as the same attempt", async () => {
    const ran: string[] = [];
    const t = await setup({
      handle: (m) => {
        ran.push(m.id);
        return Promise.resolve({ kind: "ok" });
      },
    });
    await t.emit("m1");
    t.state.gated = true;
    t.pool.start();
    await until(() => t.state.waiting === 1, "the first claim");
    await t.pool.stop(0); // the claim is still out: the deadline ends the wait
    t.state.gate.open();
    await until(() => t.state.answered === 1, "the claim's answer");
    await turn();

    expect(ran).toEqual([]);
    const back = givenBack("a claim sent before stop answered after it with 1 message(s)", ["m1"]);
    await until(() => t.records.some((r) => back.asymmetricMatch(r)), "the give-back logged");
    // As if that claim never happened: pending, its attempt not counted, claimable at once.
    expect(await t.raw.getMessage("m1")).toMatchObject({ status: "pending", attempts: 0, lockedBy: null });
    const other: ClaimedMessage[] = [];
    t.other((m) => {
      other.push(m);
      return Promise.resolve({ kind: "ok" });
    });
    await until(() => other.length === 1, "m1 claimed by another pool");
    expect(other[0]).toMatchObject({ id: "m1", attempts: 1, lockedBy: "w2" });
  });

  it("the settle of a handler that ends after stop gets one try: a failure is given up, not retried with timers", async () => {
    const hung = gate<HandlerOutcome>();
    const t = await setup({ method: "settle", handle: () => hung.promise });
    await t.emit("m1");
    t.pool.start();
    await until(() => t.pool.active === 1, "m1 running");
    await t.pool.stop(0);
    // The store refuses every settle from now on (it is closing under the stopped app).
    t.state.failing = true;
    hung.open({ kind: "ok" });
    const gaveUp = (r: Record<string, unknown>) =>
      typeof r.msg === "string" && r.msg.startsWith("settle of 1 message(s) given up (stopping)");
    await until(() => t.records.some(gaveUp), "the settle given up");

    expect(t.state.waiting).toBe(1);
    expect(t.records.filter((r) => r.msg === "settle failed; retrying")).toEqual([]);
    expect(await t.raw.getMessage("m1")).toMatchObject({ status: "inflight", attempts: 1 });
  });

  it("a handler still running at the deadline keeps its lease, marked as a graceful stop's: the claim after the lapse runs it as the same attempt, even its only one", async () => {
    // retries 0: unmarked, the claim after the lapse found its one attempt spent and settled it dead.
    const hung = gate<HandlerOutcome>();
    const t = await setup({ retries: 0, handle: () => hung.promise });
    await t.emit("m1");
    t.pool.start();
    await until(() => t.pool.active === 1, "m1 running");
    await t.pool.stop(0);
    expect(await t.raw.getMessage("m1")).toMatchObject({
      status: "inflight",
      attempts: 1,
      lockedBy: "w1#stopped",
      leaseExpiresAt: T0 + 30_000,
    });
    expect(t.records).toContainEqual(
      expect.objectContaining({
        level: 40,
        messageIds: ["m1"],
        msg: "shutdown deadline: leaving 1 message(s) still running (or waiting for their run) to lazy reclaim after their lease (30 s); their attempt not counted (a graceful stop is not a crash)",
      }),
    );
    // Nobody's before the lapse (the handler may still run): a pool at T0 + 30 s claims it as attempt 1.
    const ran: ClaimedMessage[] = [];
    t.other((m) => {
      ran.push(m);
      return Promise.resolve({ kind: "ok" });
    }, T0 + 30_000);
    await until(async () => (await t.raw.getMessage("m1"))?.status === "delivered", "m1 delivered by w2");
    expect(ran).toMatchObject([{ id: "m1", attempts: 1, lockedBy: "w2" }]);
    expect(await t.raw.getMessage("m1")).toMatchObject({ attempts: 1, failures: [] });
    hung.open({ kind: "ok" });
  });

  it("a handler that ends while the mark's answer is on its way settles under the fence the mark made: delivered, not run again", async () => {
    const hung = gate<HandlerOutcome>();
    const t = await setup({ handle: () => hung.promise });
    const mark = answeredLate(t.raw);
    await t.emit("m1");
    t.pool.start();
    await until(() => t.pool.active === 1, "m1 running");
    const stopping = t.pool.stop(0);
    await until(() => mark.committed, "the mark committed");
    // Ends now: settled under its claim's fence (w1, 1), the settle would be fenced off by the mark.
    hung.open({ kind: "ok" });
    await turn();
    mark.answer.open();
    await stopping;
    await until(async () => (await t.raw.getMessage("m1"))?.status === "delivered", "m1's settle");
    expect(await t.raw.getMessage("m1")).toMatchObject({ attempts: 1, lockedBy: null, failures: [] });
  });

  it("the stop's line counts as marked only the messages still left: one that ended while the mark was answered is not", async () => {
    const m1 = gate<HandlerOutcome>();
    const m2 = gate<HandlerOutcome>();
    const t = await setup({ concurrency: 2, handle: (m) => (m.id === "m1" ? m1.promise : m2.promise) });
    const mark = answeredLate(t.raw);
    await t.emit("m1");
    await t.emit("m2");
    t.pool.start();
    await until(() => t.pool.active === 2, "m1 and m2 running");
    const stopping = t.pool.stop(0);
    await until(() => mark.committed, "both marked");
    m1.open({ kind: "ok" });
    await turn();
    mark.answer.open();
    await stopping;
    expect(t.records).toContainEqual(
      expect.objectContaining({
        messageIds: ["m2"],
        msg: "shutdown deadline: leaving 1 message(s) still running (or waiting for their run) to lazy reclaim after their lease (30 s); their attempt not counted (a graceful stop is not a crash)",
      }),
    );
    m2.open({ kind: "ok" });
  });

  it("a mark the store refuses leaves the claim as it was (its next claim counts an attempt), logged with the ids", async () => {
    const hung = gate<HandlerOutcome>();
    const t = await setup({ method: "leaveClaimsToLease", handle: () => hung.promise });
    await t.emit("m1");
    t.pool.start();
    await until(() => t.pool.active === 1, "m1 running");
    t.state.failing = true;
    await t.pool.stop(0);
    expect(await t.raw.getMessage("m1")).toMatchObject({ status: "inflight", attempts: 1, lockedBy: "w1" });
    expect(t.records).toContainEqual(
      expect.objectContaining({
        level: 40,
        messageIds: ["m1"],
        msg: "shutdown deadline: marking the messages still running failed; each one's next claim counts an attempt",
      }),
    );
    // The stop's own line makes no claim about attempts it could not mark.
    expect(t.records).toContainEqual(
      expect.objectContaining({
        msg: "shutdown deadline: leaving 1 message(s) still running (or waiting for their run) to lazy reclaim after their lease (30 s)",
      }),
    );
    hung.open({ kind: "ok" });
  });

  it("a claim in flight that answers before the deadline runs its messages, and stop waits for them", async () => {
    const ran: string[] = [];
    const hung = gate<HandlerOutcome>();
    const t = await setup({
      handle: (m) => {
        ran.push(m.id);
        return hung.promise;
      },
    });
    await t.emit("m1");
    t.state.gated = true;
    t.pool.start();
    await until(() => t.state.waiting === 1, "the first claim");
    let stopped = false;
    const stopping = t.pool.stop(600_000).then(() => (stopped = true));
    t.state.gate.open();
    await until(() => ran.length === 1, "m1 started under the claim that was in flight");
    expect(stopped).toBe(false);
    hung.open({ kind: "ok" });
    await stopping;
    expect(await t.raw.getMessage("m1")).toMatchObject({ status: "delivered", attempts: 1 });
  });
});
