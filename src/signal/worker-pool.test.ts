// The worker pool against a real memory store, with every store call counted.
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { until } from "../../test/conformance/app-fixture.ts";
import { createTimeTravel } from "../clock/time-travel.ts";
import { createLogger } from "../log/logger.ts";
import { createMemoryStore } from "../store/memory/memory-store.ts";
import type { ClaimedMessage, Store } from "../store/types.ts";
import { signal } from "./signal.ts";
import { WorkerPool, type HandlerOutcome } from "./worker-pool.ts";

/** The pool against a real memory store, with every store call counted. */
function setup(o: {
  concurrency?: number;
  prefetch?: number;
  retries?: number;
  deadLetter?: boolean;
  handle?: (m: ClaimedMessage) => Promise<HandlerOutcome>;
  whenSpent?: (
    m: ClaimedMessage,
    unstarted?: { code: string; message: string },
  ) => Promise<HandlerOutcome | undefined>;
  whenSpentSays?: string;
}) {
  const inner = createMemoryStore();
  const calls = { claim: 0, nextLeaseExpiry: 0, settle: 0 };
  const store: Store = Object.create(inner) as Store;
  store.claim = (req) => {
    calls.claim++;
    return inner.claim(req);
  };
  store.nextLeaseExpiry = (s) => {
    calls.nextLeaseExpiry++;
    return inner.nextLeaseExpiry(s);
  };
  store.settle = (batch, now) => {
    calls.settle++;
    return inner.settle(batch, now);
  };
  const ran: string[] = [];
  const clock = createTimeTravel(1_000_000);
  // Warnings and errors, parsed: what an operator would see.
  const lines: Array<Record<string, unknown> & { msg: string }> = [];
  const pool = new WorkerPool({
    store,
    clock,
    logger: pino({ level: "warn" }, { write: (l: string) => void lines.push(JSON.parse(l)) }),
    signal: signal.once("pool.test", {
      ...(o.retries === undefined ? {} : { retries: o.retries }),
      ...(o.deadLetter === undefined ? {} : { deadLetter: o.deadLetter }),
    }),
    worker: "w1",
    concurrency: o.concurrency ?? 4,
    prefetch: o.prefetch ?? 4,
    leaseMs: 30_000,
    handle:
      o.handle ??
      ((m) => {
        ran.push(m.id);
        return Promise.resolve({ kind: "ok" });
      }),
    ...(o.whenSpent === undefined ? {} : { whenSpent: o.whenSpent }),
    ...(o.whenSpentSays === undefined ? {} : { whenSpentSays: o.whenSpentSays }),
  });
  pools.push(pool);
  const emit = (id: string) =>
    inner.enqueue([{ id, signal: "pool.test", key: null, payload: null, parentRunId: null }], 1_000_000);
  return { store: inner, pool, calls, ran, emit, clock, lines };
}

/**
 * One slot, prefetch 1: m1 runs and blocks it while m2 waits in the buffer; the clock then passes
 * m2's lease (taken with m1's claim) and m1 finishes, so the pool finds m2 lapsed. `ran` holds id#attempt.
 */
async function dropBuffered(
  o: Pick<Parameters<typeof setup>[0], "retries" | "deadLetter" | "whenSpent"> = {},
) {
  let release!: () => void;
  const blocked = new Promise<HandlerOutcome>((r) => (release = () => r({ kind: "ok" })));
  const t = setup({
    ...o,
    concurrency: 1,
    prefetch: 1,
    handle: (m) => {
      t.ran.push(`${m.id}#${m.attempts}`);
      return m.id === "m1" ? blocked : Promise.resolve({ kind: "ok" });
    },
  });
  await t.emit("m1");
  await t.emit("m2");
  t.pool.start();
  await until(() => t.ran.length === 1, "m1 started, m2 buffered");
  expect(t.ran).toEqual(["m1#1"]);
  t.clock.advance(30_000); // m2's lease (claimed with m1) runs out in the buffer
  release();
  const drops = () => t.lines.filter((l) => l.msg.startsWith("buffered message dropped"));
  return { ...t, drops };
}

const pools: WorkerPool[] = [];
afterEach(async () => {
  while (pools.length > 0) await pools.pop()!.stop(1_000);
});

describe("WorkerPool", () => {
  it("a pool that found its queue drained does not claim again after each handler", async () => {
    const { pool, calls, ran, emit } = setup({});
    pool.start();
    await pool.whenIdle();
    const base = { ...calls };
    for (let i = 0; i < 20; i++) {
      await emit(`m${i}`);
      await until(() => ran.length === i + 1, `m${i} ran`);
      await pool.whenIdle();
    }
    // One claim per emit (woken by its event), one lease query per short claim — nothing per finished handler.
    expect(calls.claim - base.claim).toBe(20);
    expect(calls.nextLeaseExpiry - base.nextLeaseExpiry).toBe(20);
    expect(calls.settle - base.settle).toBe(20);
  });

  it("a full claim means there may be more: the pool claims again as handlers finish", async () => {
    const { pool, ran, emit } = setup({ concurrency: 2, prefetch: 2 });
    for (let i = 0; i < 50; i++) await emit(`m${i}`);
    pool.start();
    await until(() => ran.length === 50, "all 50 ran");
    await pool.whenIdle();
    expect(new Set(ran).size).toBe(50);
  });

  it("a buffered message whose lease ran out before a slot freed up is dropped, logged once, and runs as its next attempt", async () => {
    const t = await dropBuffered();
    await until(() => t.ran.includes("m2#2"), "m2 claimed again and run");
    await t.pool.whenIdle();
    expect(t.drops()).toHaveLength(1);
    expect(t.drops()[0]).toMatchObject({
      level: 40,
      signal: "pool.test",
      messageId: "m2",
      attempt: 1,
      msg: "buffered message dropped: its lease (30 s) ran out before a slot freed up; it is claimable again now and runs as attempt 2",
    });
    expect(t.ran.filter((r) => r.startsWith("m2"))).toEqual(["m2#2"]); // never run late at attempt 1
    expect(await t.store.getMessage("m2")).toMatchObject({ status: "delivered", attempts: 2 });
  });

  it("a buffered message dropped with its last attempt is dead-lettered at once with a failure that says it never started", async () => {
    const t = await dropBuffered({ retries: 0 });
    await until(async () => (await t.store.getMessage("m2"))?.status === "dead", "m2 dead-lettered");
    await t.pool.whenIdle();
    expect(t.drops()).toHaveLength(1);
    expect(t.drops()[0]).toMatchObject({
      messageId: "m2",
      attempt: 1,
      msg: "buffered message dropped: its lease (30 s) ran out before a slot freed up; it held its last attempt (1), so it is settled dead (LEASE_EXPIRED, never started) without running it",
    });
    // The one line for it: no spent-claim line blaming a crash.
    expect(t.lines.filter((l) => l.messageId === "m2").map((l) => l.msg)).toEqual([t.drops()[0]!.msg]);
    expect(t.ran.filter((r) => r.startsWith("m2"))).toEqual([]);
    // What an operator reads (Console, `oke dead`, app.operator): settled by the pool under its own
    // claim, so attempts stays 1 (no further claim) and the failure names the buffer, not a crash.
    const dead = await t.store.getMessage("m2");
    expect(dead).toMatchObject({ status: "dead", attempts: 1 });
    expect(dead!.failures).toEqual([
      {
        code: "LEASE_EXPIRED",
        message:
          'attempt 1 of "pool.test" never started: its lease (30 s) ran out while it waited in this instance\'s buffer for a worker slot, and all 1 attempts are spent',
        at: 1_030_000,
        attempt: 1,
      },
    ]);
  });

  it("with deadLetter: false a buffered message dropped with its last attempt is delivered with the never-started failure", async () => {
    const t = await dropBuffered({ retries: 0, deadLetter: false });
    await until(async () => (await t.store.getMessage("m2"))?.status === "delivered", "m2 settled");
    await t.pool.whenIdle();
    expect(t.drops()[0]!.msg).toBe(
      "buffered message dropped: its lease (30 s) ran out before a slot freed up; it held its last attempt (1), so it is settled delivered (LEASE_EXPIRED, never started) without running it",
    );
    expect(t.ran.filter((r) => r.startsWith("m2"))).toEqual([]);
    const m2 = await t.store.getMessage("m2");
    expect(m2).toMatchObject({ status: "delivered", attempts: 1 });
    expect(m2!.failures.map((f) => f.message)).toEqual([
      'attempt 1 of "pool.test" never started: its lease (30 s) ran out while it waited in this instance\'s buffer for a worker slot, and all 1 attempts are spent',
    ]);
  });

  const neverStarted =
    'attempt 1 of "pool.test" never started: its lease (30 s) ran out while it waited in this instance\'s buffer for a worker slot, and all 1 attempts are spent';

  it("a durable consumer's buffered message dropped with its last attempt is settled at once: whenSpent is asked under this claim with the never-started failure, and with no run it is dead with it", async () => {
    const asked: unknown[] = [];
    const t = await dropBuffered({
      retries: 0,
      whenSpent: (m, unstarted) => {
        asked.push([`${m.id}#${m.attempts}`, unstarted]);
        return Promise.resolve(undefined);
      },
    });
    await until(async () => (await t.store.getMessage("m2"))?.status === "dead", "m2 dead-lettered");
    await t.pool.whenIdle();
    // This claim (attempt 1, the last), not a later one past the budget: its run, if an earlier
    // attempt started one, decides; the failure it gets otherwise says it never started.
    expect(asked).toEqual([["m2#1", { code: "LEASE_EXPIRED", message: neverStarted }]]);
    expect(t.drops()[0]!.msg).toBe(
      "buffered message dropped: its lease (30 s) ran out before a slot freed up; it held its last attempt (1), so it is settled without running it: with its run, or dead (LEASE_EXPIRED, never started) when it has none",
    );
    expect(t.ran.filter((r) => r.startsWith("m2"))).toEqual([]);
    const dead = await t.store.getMessage("m2");
    expect(dead).toMatchObject({ status: "dead", attempts: 1 });
    expect(dead!.failures).toEqual([
      { code: "LEASE_EXPIRED", message: neverStarted, at: 1_030_000, attempt: 1 },
    ]);
    expect(t.lines.filter((l) => l.messageId === "m2").map((l) => l.msg)).toEqual([t.drops()[0]!.msg]);
  });

  it("a durable consumer's dropped last attempt settles with what its run says (a completed run: delivered)", async () => {
    const t = await dropBuffered({ retries: 0, whenSpent: () => Promise.resolve({ kind: "ok" }) });
    await until(async () => (await t.store.getMessage("m2"))?.status === "delivered", "m2 delivered");
    await t.pool.whenIdle();
    expect(await t.store.getMessage("m2")).toMatchObject({ status: "delivered", attempts: 1, failures: [] });
    expect(t.ran.filter((r) => r.startsWith("m2"))).toEqual([]);
  });

  it("a durable consumer's dropped last attempt whose run another instance holds is left to its lease, and the pool claims on", async () => {
    const asked: string[] = [];
    const t = await dropBuffered({
      retries: 0,
      whenSpent: (m, unstarted) => {
        asked.push(`${m.id}#${m.attempts}${unstarted ? " unstarted" : ""}`);
        return Promise.resolve(
          unstarted
            ? { kind: "abandon" as const, runId: m.id }
            : { kind: "error" as const, failure: { code: "E", message: "run failed" } },
        );
      },
    });
    // Nothing settled under the dropped claim, so the pool claims again: its claim past the budget
    // asks the run again (not as never started) and settles with the run's failure.
    await until(async () => (await t.store.getMessage("m2"))?.status === "dead", "m2 dead");
    await t.pool.whenIdle();
    expect(asked).toEqual(["m2#1 unstarted", "m2#2"]);
    expect((await t.store.getMessage("m2"))!.failures.map((f) => f.message)).toEqual(["run failed"]);
  });

  it("an abandoned attempt (its run leased by another holder) is logged once and redelivered after its lease", async () => {
    const t = setup({
      handle: (m) => {
        t.ran.push(`${m.id}#${m.attempts}`);
        return Promise.resolve(m.attempts === 1 ? { kind: "abandon", runId: m.id } : { kind: "ok" });
      },
    });
    await t.emit("m1");
    t.pool.start();
    await until(() => t.ran.length === 1, "attempt 1 ran");
    await t.pool.whenIdle();
    const abandons = () => t.lines.filter((l) => l.code === "JournalLeaseBusy");
    expect(abandons()).toEqual([
      expect.objectContaining({
        level: 40,
        signal: "pool.test",
        messageId: "m1",
        attempt: 1,
        runId: "m1",
        retryInMs: 30_000,
        msg: 'attempt 1 left to its lease: run "m1" is leased by another holder; the message is redelivered after its lease (30 s) lapses',
      }),
    ]);
    expect(await t.store.getMessage("m1")).toMatchObject({ status: "inflight", attempts: 1 });
    t.clock.advance(30_000); // the lease lapses: the pool's lease timer claims it again
    await until(async () => (await t.store.getMessage("m1"))?.status === "delivered", "m1 delivered");
    expect(t.ran).toEqual(["m1#1", "m1#2"]);
    expect(abandons()).toHaveLength(1);
  });

  it("reserve() holds a slot for a message written already claimed and runs it; release() gives it back", async () => {
    const { store, pool, ran, emit } = setup({ concurrency: 1, prefetch: 0 });
    pool.start();
    await pool.whenIdle();
    const slot = pool.reserve();
    expect(slot).toBeDefined();
    expect(pool.reserve()).toBeUndefined(); // the only slot is held
    slot!.release();
    const again = pool.reserve()!;
    // Stand in for a driver's enqueueClaimed: the message is written and claimed for this pool's worker.
    // The pool itself does not claim it: its one slot is reserved.
    await emit("direct");
    const [m] = await store.claim({
      signal: "pool.test",
      worker: "w1",
      max: 1,
      now: 1_000_000,
      leaseMs: 30_000,
    });
    expect(pool.isIdle()).toBe(false);
    again.start(m!);
    expect(ran).toEqual(["direct"]);
    await pool.whenIdle();
    expect(await store.getMessage("direct")).toMatchObject({ status: "delivered", attempts: 1 });
  });
  it("hand-off: a store that claims keyed successors at settle feeds the pool without claims, within its room, in key order", async () => {
    const inner = createMemoryStore();
    const calls = { claim: 0, handed: 0 };
    let held = 0; // claimed by the pool and not settled yet
    let maxHeld = 0;
    const store: Store = Object.create(inner) as Store;
    store.claim = async (req) => {
      calls.claim++;
      const got = await inner.claim(req);
      held += got.length;
      maxHeld = Math.max(maxHeld, held);
      return got;
    };
    // Stands in for the postgres hand-off: the settle also claims up to max (the memory claim keeps key order).
    store.settle = async (batch, now, handoff) => {
      const r = await inner.settle(batch, now);
      held -= r.applied.length;
      if (handoff === undefined) return r;
      expect(handoff.max).toBeLessThanOrEqual(batch.length);
      const claimed = await inner.claim({
        signal: "pool.keyed",
        worker: handoff.worker,
        max: handoff.max,
        now,
        leaseMs: handoff.leaseMs,
      });
      calls.handed += claimed.length;
      held += claimed.length;
      maxHeld = Math.max(maxHeld, held);
      return claimed.length > 0 ? { ...r, claimed } : r;
    };
    const ran: Array<{ key: string; j: number }> = [];
    const pool = new WorkerPool({
      store,
      clock: createTimeTravel(1_000_000),
      logger: createLogger({ format: "silent" }),
      signal: signal.once("pool.keyed"),
      worker: "w1",
      concurrency: 3,
      prefetch: 2,
      leaseMs: 30_000,
      handoff: true,
      handle: (m) => {
        ran.push(m.payload as { key: string; j: number });
        return Promise.resolve({ kind: "ok" });
      },
    });
    pools.push(pool);
    const msgs = [];
    for (let j = 0; j < 10; j++)
      for (let k = 0; k < 8; k++)
        msgs.push({
          id: `m-${j}-${k}`,
          signal: "pool.keyed",
          key: `k${k}`,
          payload: { key: `k${k}`, j },
          parentRunId: null,
        });
    await inner.enqueue(msgs, 1_000_000);
    pool.start();
    await until(() => ran.length === 80);
    await pool.whenIdle();
    expect(new Set(ran.map((r) => `${r.key}/${r.j}`)).size).toBe(80);
    for (let k = 0; k < 8; k++) {
      const js = ran.filter((r) => r.key === `k${k}`).map((r) => r.j);
      expect(js).toEqual([...js].sort((a, b) => a - b));
    }
    expect(calls.handed).toBeGreaterThan(0);
    expect(maxHeld).toBeLessThanOrEqual(3 + 2);
    expect(await inner.stats("pool.keyed", 1_000_000)).toMatchObject({
      pending: 0,
      inflight: 0,
      delivered: 80,
    });
  });
});

describe("WorkerPool: a handler still running when its lease runs out", () => {
  const released = <L extends { msg: string }>(lines: L[]) =>
    lines.filter((l) => l.msg.startsWith("handler still running after its lease"));
  const pending = new Promise<HandlerOutcome>(() => undefined);

  it("frees its slot (logged): the message runs retries + 1 times and is dead-lettered, and the others all run", async () => {
    const t = setup({
      concurrency: 4,
      retries: 3,
      handle: (m) => {
        t.ran.push(`${m.id}#${m.attempts}`);
        return m.id === "hung" ? pending : Promise.resolve({ kind: "ok" });
      },
    });
    await t.emit("hung");
    t.pool.start();
    await until(() => t.ran.includes("hung#1"), "attempt 1 started");
    for (let a = 2; a <= 4; a++) {
      t.clock.advance(30_000); // attempt a - 1's lease runs out: the pool's lease timer claims it again
      await until(() => t.ran.includes(`hung#${a}`), `attempt ${a} started`);
    }
    const others = Array.from({ length: 20 }, (_, i) => `n${i}`);
    for (const id of others) await t.emit(id);
    // Before, the four attempts held all four slots for good and none of these ever ran.
    await until(() => t.ran.filter((r) => r.startsWith("n")).length === 20, "the 20 others ran");
    // Attempts 1-3 still hang but hold nothing: the one slot taken is attempt 4's.
    expect(t.pool.active).toBe(1);
    expect(t.pool.leftIds()).toEqual(["hung"]);
    t.clock.advance(30_000); // attempt 4's lease runs out: the next claim finds the budget spent
    await until(async () => (await t.store.getMessage("hung"))?.status === "dead", "hung dead-lettered");
    await t.pool.whenIdle();

    expect(t.ran.filter((r) => r.startsWith("hung"))).toEqual(["hung#1", "hung#2", "hung#3", "hung#4"]);
    expect(t.ran.filter((r) => r.startsWith("n")).sort()).toEqual(others.map((id) => `${id}#1`).sort());
    const dead = await t.store.getMessage("hung");
    expect(dead).toMatchObject({ status: "dead", attempts: 5 });
    expect(dead!.failures).toEqual([
      {
        code: "LEASE_EXPIRED",
        message:
          'attempt 4 of "pool.test" did not finish within its lease: its handler ran past the lease (slow or hung), crashed, or lost its process, and all 4 attempts are spent',
        at: 1_120_000,
        attempt: 4,
      },
    ]);
    expect(await t.store.stats("pool.test", t.clock.now())).toMatchObject({
      pending: 0,
      inflight: 0,
      delivered: 20,
      dead: 1,
    });
    const lease =
      "handler still running after its lease (30 s) ran out; its slot is freed and the message will be claimed again";
    expect(released(t.lines)).toEqual(
      [1, 2, 3, 4].map((attempt) => ({
        level: 40,
        time: expect.any(Number) as number,
        pid: expect.any(Number) as number,
        hostname: expect.any(String) as string,
        signal: "pool.test",
        messageId: "hung",
        attempt,
        lateMs: 0,
        msg:
          (attempt < 4
            ? `${lease}: it runs as attempt ${attempt + 1}`
            : `${lease}: its 4 attempt(s) are spent, so that claim settles it dead (LEASE_EXPIRED) without running it`) +
          ". Work longer than the lease belongs in a durable flow (each step renews its lease) or needs a longer signals.leaseMs",
      })),
    );
    // The hung handlers take no slot: nothing runs, nothing is held.
    expect(t.pool.active).toBe(0);
    expect(t.pool.leftIds()).toEqual([]);
  });

  it("a hung handler that resolves after its message was claimed again settles nothing and leaves the pool's counts alone", async () => {
    const gates = new Map<string, () => void>();
    const running = new Set<string>();
    let most = 0;
    const t = setup({
      concurrency: 2,
      handle: (m) => {
        const run = `${m.id}#${m.attempts}`;
        t.ran.push(run);
        running.add(run);
        most = Math.max(most, running.size);
        return new Promise((resolve) =>
          gates.set(run, () => {
            running.delete(run);
            resolve({ kind: "ok" });
          }),
        );
      },
    });
    const open = (run: string) => gates.get(run)!();
    await t.emit("m1");
    await t.emit("m2");
    t.pool.start();
    await until(() => gates.has("m1#1") && gates.has("m2#1"), "both slots taken");
    t.clock.advance(30_000); // both leases run out while their handlers hang
    await until(() => gates.has("m1#2") && gates.has("m2#2"), "both claimed again and run");
    expect(released(t.lines).map((l) => [l.messageId, l.attempt])).toEqual([
      ["m1", 1],
      ["m2", 1],
    ]);
    expect(t.pool.active).toBe(2);

    // The first attempts resolve late: their settles are fenced off (attempt 2 holds the messages).
    open("m1#1");
    open("m2#1");
    const fenced = () =>
      t.lines.flatMap((l) => (l.msg.startsWith("settle ignored") ? (l.fenced as string[]) : []));
    await until(() => fenced().length === 2, "the late settles came back refused");
    expect(fenced().sort()).toEqual(["m1", "m2"]);
    for (const id of ["m1", "m2"])
      expect(await t.store.getMessage(id)).toMatchObject({ status: "inflight", attempts: 2, lockedBy: "w1" });
    // Still two slots taken, by the second attempts: the late ends freed none of theirs.
    expect(t.pool.active).toBe(2);
    expect(t.pool.leftIds().sort()).toEqual(["m1", "m2"]);

    open("m1#2");
    open("m2#2");
    for (const id of ["m1", "m2"])
      await until(async () => (await t.store.getMessage(id))?.status === "delivered", `${id} delivered`);
    expect(await t.store.getMessage("m1")).toMatchObject({ attempts: 2, failures: [] });

    // The pool still runs exactly `concurrency` handlers at once (counted from here: until now the
    // late first attempts ran beside the second ones, outside the slots).
    most = 0;
    for (let i = 0; i < 5; i++) await t.emit(`a${i}`);
    // Its handlers took about a lease each so far, so the pool prefetches nothing now (prefetchFor):
    // it claims into free slots only.
    await until(() => running.size === 2, "two claimed and running");
    expect(t.pool.leftIds()).toHaveLength(2);
    expect(t.pool.active).toBe(2);
    expect(running.size).toBe(2);
    for (let i = 0; i < 5; i++) {
      await until(() => running.size > 0, "a handler running");
      open([...running][0]!);
    }
    await until(
      async () => (await t.store.stats("pool.test", t.clock.now())).delivered === 7,
      "all delivered",
    );
    await t.pool.whenIdle();
    expect(most).toBe(2);
    expect(t.pool.active).toBe(0);
    expect(t.pool.leftIds()).toEqual([]);
    expect(released(t.lines)).toHaveLength(2);
  });

  it("a handler past its lease neither keeps the pool busy nor holds up stop(), which reports it but not as left", async () => {
    const t = setup({
      concurrency: 1,
      handle: (m) => {
        t.ran.push(`${m.id}#${m.attempts}`);
        return m.attempts === 1 ? pending : Promise.resolve({ kind: "ok" });
      },
    });
    await t.emit("m1");
    t.pool.start();
    await until(() => t.ran.includes("m1#1"), "attempt 1 started");
    t.clock.advance(30_000);
    await until(async () => (await t.store.getMessage("m1"))?.status === "delivered", "m1 delivered");
    await t.pool.whenIdle();
    expect(t.ran).toEqual(["m1#1", "m1#2"]);
    expect(t.pool.active).toBe(0);
    expect(t.pool.leftIds()).toEqual([]);
    // A deadline far beyond the test's timeout: stop() must not wait for attempt 1.
    await t.pool.stop(600_000);
    expect(t.lines.filter((l) => l.msg.startsWith("shutdown deadline"))).toEqual([]);
    expect(t.lines.at(-1)).toMatchObject({
      level: 40,
      signal: "pool.test",
      pastLease: ["m1#1"],
      msg: "stopped with 1 handler(s) still running after their lease ran out; their slots were freed then, and their messages were already anyone's to claim",
    });
  });

  it("a pool whose whenSpent is not a run lookup (a broadcast copy) says what its spent claim does, not a durable consumer's words", async () => {
    let finish!: () => void;
    const t = setup({
      concurrency: 1,
      retries: 0,
      deadLetter: false,
      handle: (m) => {
        t.ran.push(`${m.id}#${m.attempts}`);
        return new Promise((resolve) => (finish = () => resolve({ kind: "ok" })));
      },
      whenSpent: () => Promise.resolve({ kind: "ok" as const }),
      whenSpentSays: "that claim settles the copy as cut off, without running it again",
    });
    await t.emit("c1");
    t.pool.start();
    await until(() => t.ran.includes("c1#1"), "the copy started");
    t.clock.advance(30_000);
    await until(
      async () => (await t.store.getMessage("c1"))?.status === "delivered",
      "the spent copy settled",
    );
    finish();
    await t.pool.whenIdle();
    expect(t.ran).toEqual(["c1#1"]);
    expect(t.lines.filter((l) => l.messageId === "c1").map((l) => l.msg)).toEqual([
      "handler still running after its lease (30 s) ran out; its slot is freed and the message will be claimed again: its 1 attempt(s) are spent, so that claim settles the copy as cut off, without running it again",
    ]);
  });

  it("a durable consumer's claim that finds the run busy while its own attempt still runs here past its lease asks again once that attempt ends", async () => {
    let finish!: () => void;
    let late = true; // attempt 1 still holds the run
    const asked: string[] = [];
    const t = setup({
      concurrency: 1,
      retries: 0,
      handle: (m) => {
        t.ran.push(`${m.id}#${m.attempts}`);
        if (m.id !== "m1") return Promise.resolve({ kind: "ok" });
        return new Promise((resolve) => (finish = () => resolve({ kind: "ok" })));
      },
      // Stands in for the durable runtime: busy while attempt 1 runs, completed once it has ended.
      whenSpent: (m) => {
        asked.push(`${m.id}#${m.attempts}`);
        return Promise.resolve(late ? { kind: "abandon" as const, runId: m.id } : { kind: "ok" as const });
      },
    });
    await t.emit("m1");
    t.pool.start();
    await until(() => t.ran.includes("m1#1"), "attempt 1 started");
    t.clock.advance(30_000); // attempt 1 runs on past its lease: its slot is freed
    await until(() => asked.length === 1, "claim 2 asks the run");
    await until(() => t.pool.leftIds().length === 1, "claim 2 waits for attempt 1");
    expect(t.pool.active).toBe(0);
    expect(t.pool.leftIds()).toEqual(["m1"]);
    // The freed slot runs other messages meanwhile.
    await t.emit("m2");
    await until(async () => (await t.store.getMessage("m2"))?.status === "delivered", "m2 delivered");
    t.clock.advance(30_000); // claim 2's lease runs out while it waits: claim 3 finds the run busy too
    await until(() => asked.length === 2, "claim 3 asks the run");
    late = false;
    finish(); // attempt 1 ends: its late settle is fenced off, and claim 3 asks the run again
    await until(async () => (await t.store.getMessage("m1"))?.status === "delivered", "m1 delivered");
    await t.pool.whenIdle();
    expect(asked).toEqual(["m1#2", "m1#3", "m1#3"]);
    expect(t.ran).toEqual(["m1#1", "m2#1"]);
    expect(await t.store.getMessage("m1")).toMatchObject({ attempts: 3, failures: [] });
    expect(t.lines.filter((l) => l.messageId === "m1").map((l) => [l.attempt, l.msg])).toEqual([
      [
        1,
        "handler still running after its lease (30 s) ran out; its slot is freed and the message will be claimed again: its 1 attempt(s) are spent, so that claim settles it with its run, or dead (LEASE_EXPIRED) when it has none; should that claim find its run busy, it runs again here once this attempt has ended",
      ],
      [2, expect.stringMatching(/^attempt 2 left to its lease: run "m1" is leased by another holder/)],
      [3, expect.stringMatching(/^attempt 3 left to its lease: run "m1" is leased by another holder/)],
    ]);
    expect(t.lines.filter((l) => l.msg.startsWith("settle ignored"))).toEqual([
      expect.objectContaining({ fenced: ["m1"] }),
    ]);
    expect(t.pool.active).toBe(0);
    expect(t.pool.leftIds()).toEqual([]);
  });

  it("a durable consumer's spent-claim run lookup that hangs past its lease frees its slot too", async () => {
    const lookups: Array<{ run: string; answer: (o: HandlerOutcome) => void }> = [];
    const t = setup({
      concurrency: 1,
      retries: 0,
      whenSpent: (m) => new Promise((answer) => lookups.push({ run: `${m.id}#${m.attempts}`, answer })),
    });
    await t.emit("m1");
    // Its one attempt was made by a holder that died: the pool's claim is past the budget.
    await t.store.claim({ signal: "pool.test", worker: "gone", max: 1, now: 970_000, leaseMs: 30_000 });
    t.pool.start();
    await until(() => lookups.length === 1, "the spent claim asks the run");
    expect(t.pool.active).toBe(1);
    t.clock.advance(30_000); // the lookup hangs past its lease: its slot is freed, claim 3 asks again
    await until(() => lookups.length === 2, "claim 3 asks the run");
    expect(lookups.map((l) => l.run)).toEqual(["m1#2", "m1#3"]);
    expect(t.pool.active).toBe(1);
    lookups[1]!.answer({ kind: "abandon", runId: "m1" }); // busy: the hung lookup holds the run
    await until(() => t.pool.active === 0, "claim 3 waits for the hung lookup");
    await t.emit("m2");
    await until(() => t.ran.includes("m2"), "m2 ran in the freed slot");
    lookups[0]!.answer({ kind: "ok" }); // late: fenced off; claim 3 asks again
    await until(() => lookups.length === 3, "claim 3 asks again");
    lookups[2]!.answer({ kind: "ok" });
    await until(async () => (await t.store.getMessage("m1"))?.status === "delivered", "m1 delivered");
    await t.pool.whenIdle();
    expect(lookups.map((l) => l.run)).toEqual(["m1#2", "m1#3", "m1#3"]);
    expect(await t.store.getMessage("m1")).toMatchObject({ attempts: 3 });
    expect(t.lines.filter((l) => l.messageId === "m1").map((l) => l.msg)[0]).toBe(
      "run lookup of a spent claim still running after its lease (30 s) ran out; its slot is freed and the message will be claimed again: that claim asks its run again; should that claim find its run busy, it runs again here once this lookup has ended",
    );
    expect(t.pool.active).toBe(0);
    expect(t.pool.leftIds()).toEqual([]);
  });
});

describe("WorkerPool: a buffer slower than the lease", () => {
  /** A handler per message that waits for its gate (`id#attempt`), recording the lease left at its start. */
  function gated(o: { concurrency: number; prefetch: number }) {
    const gates = new Map<string, () => void>();
    const leaseLeftAtStart = new Map<string, number>();
    const t = setup({
      ...o,
      handle: (m) => {
        const run = `${m.id}#${m.attempts}`;
        t.ran.push(run);
        leaseLeftAtStart.set(run, m.leaseExpiresAt - t.clock.now());
        return new Promise<HandlerOutcome>((r) => gates.set(run, () => r({ kind: "ok" })));
      },
    });
    const open = (run: string) => gates.get(run)!();
    return { ...t, gates, open, leaseLeftAtStart };
  }

  it("a prefetched message left with under half its lease is given back unstarted and runs with a whole lease", async () => {
    const t = gated({ concurrency: 1, prefetch: 1 });
    await t.emit("m1");
    await t.emit("m2");
    t.pool.start();
    await until(() => t.gates.has("m1#1"), "m1 running, m2 buffered");
    t.clock.advance(16_000); // m2 (claimed with m1) now has 14 s of its 30 s lease left
    t.open("m1#1");
    await until(() => t.gates.has("m2#1"), "m2 running");
    // Not started with 14 s left: given back (its attempt not counted) and claimed again, 30 s left.
    expect(t.leaseLeftAtStart.get("m2#1")).toBe(30_000);
    expect(t.ran).toEqual(["m1#1", "m2#1"]);
    const back = t.lines.filter((l) => l.msg.includes("prefetched message(s) waited for a slot"));
    expect(back).toHaveLength(1);
    expect(back[0]).toMatchObject({ signal: "pool.test", messageIds: ["m2"] });
    expect(back[0]!.msg).toMatch(
      /^1 prefetched message\(s\) waited for a slot until less than half their lease \(30 s\) was left \(handlers take ~16000 ms here; prefetch now 0\): not run here; given back unstarted/,
    );
    t.open("m2#1");
    await until(async () => (await t.store.getMessage("m2"))?.status === "delivered", "m2 delivered");
    expect(await t.store.getMessage("m2")).toMatchObject({ attempts: 1, failures: [] });
  });

  it("handlers that take a good part of the lease shrink the prefetch, so the buffer drains in time", async () => {
    const t = gated({ concurrency: 2, prefetch: 4 });
    for (let i = 0; i < 2; i++) await t.emit(`s${i}`);
    t.pool.start();
    await until(() => t.gates.has("s0#1") && t.gates.has("s1#1"), "both slots taken");
    // Two handlers of 12 s each (of a 30 s lease): the last of p buffered messages would start after
    // p / 2 runs and must keep two runs of lease, so p = 2 × (30 - 24) / 12 = 1.
    t.clock.advance(12_000);
    t.open("s0#1");
    t.open("s1#1");
    await until(
      async () => (await t.store.stats("pool.test", t.clock.now())).delivered === 2,
      "both delivered",
    );
    for (let i = 0; i < 10; i++) await t.emit(`m${i}`);
    t.pool.wake();
    await until(() => t.gates.has("m0#1") && t.gates.has("m1#1"), "two more running");
    // Two running and one prefetched, where the configured prefetch (4) would have held six.
    await until(
      async () => (await t.store.stats("pool.test", t.clock.now())).inflight === 3,
      "three claimed",
    );
    expect(t.pool.leftIds()).toHaveLength(3);
  });
});
