// The Console API over HTTP: signals, messages, dead letters, replay at a rate, runs, auth.
import { hostname } from "node:os";
import { afterEach, describe, expect, it } from "vitest";
import { createApp } from "../app/app.ts";
import type { App } from "../app/types.ts";
import { createTimeTravel, type TimeTravel } from "../clock/time-travel.ts";
import { channel, clock, flow, on, signal } from "../index.ts";
import { drivers } from "../../test/conformance/drivers.ts";
import { until } from "../../test/conformance/app-fixture.ts";
import type { Store } from "../store/types.ts";
import { OkeError } from "../errors.ts";
import { MISMATCH_FIX, UNKNOWN_FLOW_FIX, unknownFlowHold } from "../durable/mismatch-log.ts";
import { spentSettlement } from "../signal/attempt-budget.ts";
import { heldLimits, replayLimits } from "./api.ts";
import { broadcastQueue } from "../signal/broadcast-runtime.ts";

const TOKEN = "alice-secret-0123456789";
const jobs = signal.once<{ n: number; fail?: boolean }>("jobs.run", { retries: 1 });
const delivered: number[] = [];
const worker = on(
  jobs,
  flow("jobs.work", {
    do: ({ n, fail }: { n: number; fail?: boolean }) => {
      if (fail && !delivered.includes(-n))
        throw Object.assign(new Error(`job ${n} broke`), { code: "E_JOB" });
      delivered.push(n);
    },
  }),
);
const child = flow("trip.child", {
  durable: true,
  do: async (_: { x: number }, fx) => fx.step("inner", () => 42),
});
const parent = flow("trip.parent", {
  durable: true,
  do: async (_: { x: number }, fx) => {
    await fx.step("book", () => ({ seat: "12A" }));
    await fx.emit(jobs, { n: 100 });
    await fx.call(child, { x: 1 });
    await fx.clock.sleep("wait-for-payment", "1h");
    return "done";
  },
});

// A second once signal whose consumer always fails; a broadcast and a live signal a run emits to.
const other = signal.once<{ n: number }>("jobs.other", { retries: 0 });
const otherWorker = on(
  other,
  flow("jobs.otherWork", {
    do: ({ n }: { n: number }) => {
      throw new Error(`other ${n} broke`);
    },
  }),
);
const news = signal.broadcast<{ n: number }>("news.posted");
const newsReader = on(news, flow("news.read", { do: () => undefined }));
const ticker = signal.live<{ n: number }>("ticker.moved");
// A second subscriber of news.posted whose handler always throws (bound only where a test adds it).
const newsBreaker = on(
  news,
  flow("news.break", {
    do: ({ n }: { n: number }) => {
      throw Object.assign(new Error(`news ${n} broke`), { code: "E_NEWS" });
    },
  }),
);
// Many calls and emits in one run: more than a page of children and of message look-ups.
const many = flow("trip.many", {
  durable: true,
  do: async ({ calls }: { calls: number }, fx) => {
    for (let i = 0; i < calls; i++) {
      await fx.call(child, { x: i });
      await fx.emit(jobs, { n: 5_000 + i });
    }
    await fx.emit(news, { n: 1 });
    await fx.emit(ticker, { n: 1 });
    return calls;
  },
});
// Emitters of jobs.other (whose consumer always fails): a plain flow's invocation id becomes its
// message's parentRunId like a durable run's does, but no run of that id is ever stored.
const plainEmitter = flow("trip.plainEmit", {
  do: async ({ n }: { n: number }, fx) => {
    await fx.emit(other, { n });
  },
});
const durableEmitter = flow("trip.durableEmit", {
  durable: true,
  do: async ({ n }: { n: number }, fx) => {
    await fx.emit(other, { n });
  },
});
// A durable consumer of messages a plain flow emits: its run's parent is that flow's invocation,
// which is never stored as a run; the child it calls has a stored parent whose own parent is not.
const relay = signal.once<{ n: number }>("jobs.relay");
const relayWorker = on(
  relay,
  flow("jobs.relayWork", {
    durable: true,
    do: async ({ n }: { n: number }, fx) => fx.call(child, { x: n }),
  }),
);
const plainRelay = flow("trip.plainRelay", {
  do: async ({ n }: { n: number }, fx) => {
    await fx.emit(relay, { n });
  },
});
// A once signal this app emits and no instance consumes (its worker removed): its messages wait.
const orphanJobs = signal.once<{ n: number }>("jobs.orphan", { retries: 0, optional: true });
const napper = flow("trip.napper", {
  durable: true,
  do: async (_: { x: number }, fx) => {
    await fx.clock.sleep("nap", "1h");
  },
});

let nightlyFires = 0;
const nightly = on(
  clock("reports.nightly", { cron: "0 3 * * *", overridable: true }),
  flow("reports.nightly", { do: () => void nightlyFires++ }),
);
const fixed = on(clock("reports.fixed", { every: "1d" }), flow("reports.fixed", { do: () => undefined }));

// A deploy changes this child under its sleeping runs: the first version journals step "a" where the
// second asks for "b", so the second holds the run back when it wakes (OKE1301).
const heldChild = (first: string) =>
  flow("held.child", {
    durable: true,
    do: async (_: { x: number }, fx) => {
      await fx.step(first, () => 1);
      await fx.clock.sleep("w", "1m");
      return "done";
    },
  });
const heldParent = (child: ReturnType<typeof heldChild>) =>
  flow("held.parent", {
    durable: true,
    do: async (_: { x: number }, fx) => {
      await fx.call(child, { x: 1 });
      return "called";
    },
  });

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- response bodies are checked field by field
type Body = any;

interface Started {
  app: App;
  time: TimeTravel;
  url: string;
  api: (
    path: string,
    init?: RequestInit & { token?: string | null },
  ) => Promise<{ status: number; body: Body }>;
}

describe.each(drivers)("Console API on the $name driver", (driver) => {
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    while (cleanups.length > 0) await cleanups.pop()!();
  });

  async function start(
    opts: {
      tokens?: Record<string, string> | null;
      store?: (s: Store) => Store;
      /** More modules beside the usual ones. */
      modules?: Record<string, unknown>;
    } = {},
  ): Promise<Started> {
    const made = await driver.make();
    cleanups.push(made.cleanup);
    const time = createTimeTravel(1_700_000_000_000);
    const app = createApp({
      modules: [
        {
          worker,
          parent,
          child,
          nightly,
          fixed,
          otherWorker,
          newsReader,
          ticker,
          many,
          napper,
          plainEmitter,
          durableEmitter,
        },
        ...(opts.modules ? [opts.modules] : []),
      ],
      env: "test",
      clock: time,
      store: opts.store ? opts.store(made.store) : made.store,
      config: {
        console: { port: 0, ...(opts.tokens === null ? {} : { tokens: opts.tokens ?? { alice: TOKEN } }) },
      },
    });
    cleanups.push(() => app.stop({ timeoutMs: 2_000 }));
    const { console: c } = await app.start({ port: 0, host: "127.0.0.1" });
    expect(c).toBeDefined();
    const url = c!.url;
    return {
      app,
      time,
      url,
      api: async (path, init = {}) => {
        const headers = new Headers(init.headers);
        const token = init.token === undefined ? TOKEN : init.token;
        if (token !== null) headers.set("authorization", `Bearer ${token}`);
        if (init.method === "POST") {
          headers.set("content-type", "application/json");
          if (!headers.has("x-oke-console")) headers.set("x-oke-console", "1");
        }
        const res = await fetch(url + path, { ...init, headers });
        return { status: res.status, body: await res.json() };
      },
    };
  }

  /** A durable flow of 230 steps (s0…s229) that returns "done": a journal long enough to be cut. */
  const longRunOf = (name: string) =>
    flow(name, {
      durable: true,
      do: async (_: { n: number }, fx) => {
        for (let i = 0; i < 230; i++) await fx.step(`s${i}`, () => i);
        return "done";
      },
    });

  it("sends a long run's timeline as its first 50 and last 100 entries and what it left out; ?timeline=all sends every one", async () => {
    const longRun = longRunOf("long.steps");
    const { app, api } = await start({ modules: { longRun } });
    expect(await app.invoke(longRun, { n: 1 })).toBe("done");
    const id = (await api("/api/runs?flow=long.steps")).body.items[0].id as string;
    const all = await api(`/api/runs/${id}?timeline=all`);
    expect(all.status).toBe(200);
    const n = all.body.timeline.length;
    expect(n).toBeGreaterThanOrEqual(230);
    expect(all.body.timelineOmitted).toBeUndefined();
    const cut = await api(`/api/runs/${id}`);
    // The same items as the whole timeline's head and tail, each with its time since the entry before.
    expect(cut.body.timeline).toEqual([...all.body.timeline.slice(0, 50), ...all.body.timeline.slice(-100)]);
    expect(cut.body.timelineOmitted).toEqual({
      count: n - 150,
      afterSeq: all.body.timeline[49].seq,
      beforeSeq: all.body.timeline[n - 100].seq,
    });
    const bad = await api(`/api/runs/${id}?timeline=everything`);
    expect(bad.status).toBe(400);
    expect(bad.body.error.message).toBe(
      'console: timeline must be "all" (every journal entry) or left out, got "everything"',
    );
  });

  it("a step whose body made effects: its value on its first entry, its closing entry names the body's positions (no preview)", async () => {
    const tips = channel("console.tips");
    const tipper = flow("console.tipper", {
      durable: true,
      do: async (_: { n: number }, fx) => {
        const v = await fx.step("tip", async () => {
          await fx.send(tips, { a: 1 });
          return { tip: 5 };
        });
        await fx.step("plain", () => 3);
        return v;
      },
    });
    const { app, api } = await start({ modules: { tipper, tips } });
    await app.invoke(tipper, { n: 1 });
    const id = (await api("/api/runs?flow=console.tipper")).body.items[0].id as string;
    const items = (await api(`/api/runs/${id}`)).body.timeline as Array<Record<string, unknown>>;
    expect(items.map((i) => [i.seq, i.kind, i.name, i.preview, i.closes])).toEqual([
      [0, "step", "tip", '{"tip":5}', undefined],
      [1, "send", "console.tips", undefined, undefined],
      [2, "step", "tip", undefined, [1]],
      [3, "step", "plain", "3", undefined],
    ]);
  });

  it("a long run's cut timeline reads only the journal's ends from the store; a store without getJournalEnds gives the same answer", async () => {
    const longRun = longRunOf("long.ends");
    const reads: string[] = [];
    /** Counts whole-journal reads; `ends: false` hides getJournalEnds as a third-party driver would. */
    const counting =
      (ends: boolean) =>
      (s: Store): Store =>
        new Proxy(s, {
          get(target, prop) {
            if (prop === "getJournalEnds" && !ends) return undefined;
            const v: unknown = Reflect.get(target, prop, target);
            if (typeof v !== "function") return v;
            if (prop === "getJournal" || prop === "getJournalEnds")
              return (...args: unknown[]) => {
                reads.push(prop);
                return (v as (...a: unknown[]) => unknown).apply(target, args);
              };
            return (v as (...a: unknown[]) => unknown).bind(target);
          },
        });
    const answers: Array<{ timeline: Array<{ name: string }>; omitted: { count: number } }> = [];
    for (const ends of [true, false]) {
      const { app, api } = await start({ modules: { longRun }, store: counting(ends) });
      expect(await app.invoke(longRun, { n: 1 })).toBe("done");
      const id = (await api("/api/runs?flow=long.ends")).body.items[0].id as string;
      reads.length = 0;
      const cut = await api(`/api/runs/${id}`);
      expect(cut.status).toBe(200);
      expect(reads).toEqual(ends ? ["getJournalEnds"] : ["getJournal"]);
      answers.push({ timeline: cut.body.timeline, omitted: cut.body.timelineOmitted });
      reads.length = 0;
      expect((await api(`/api/runs/${id}?timeline=all`)).body.timeline).toHaveLength(
        cut.body.timelineOmitted.count + 150,
      );
      expect(reads).toEqual(["getJournal"]);
      await app.stop({ timeoutMs: 2_000 });
    }
    // Run ids and times differ between the two apps; the shape of the cut does not.
    const shape = (a: (typeof answers)[number]) => ({
      names: a.timeline.map((i) => i.name),
      count: a.omitted.count,
    });
    expect(shape(answers[0]!)).toEqual(shape(answers[1]!));
    expect(shape(answers[0]!).names.slice(49, 51)).toEqual(["s49", "s130"]);
    expect(shape(answers[0]!).count).toBe(80);
  });

  it("lists signals with counts and throughput; pages messages; shows a dead letter's failures; replays it once", async () => {
    delivered.length = 0;
    const { app, api, time } = await start();
    await app.emit(jobs, { n: 1 });
    await app.emit(jobs, { n: 2, fail: true });
    await app.emit(jobs, { n: 3, fail: true });
    await app.idle();
    const sigs = await api("/api/signals");
    expect(sigs.status).toBe(200);
    const s = sigs.body.signals.find((x: { name: string }) => x.name === "jobs.run");
    expect(s).toMatchObject({ name: "jobs.run", delivery: "once", pending: 0, dead: 2, delivered: 1 });
    expect(s.throughput.delivered.reduce((a: number, b: number) => a + b, 0)).toBe(1);

    const dead = await api("/api/signals/jobs.run/dead?limit=1");
    expect(dead.body.items).toHaveLength(1);
    expect(dead.body.next).toEqual(expect.any(String));
    const rest = await api(
      `/api/signals/jobs.run/messages?status=dead&limit=1&cursor=${encodeURIComponent(dead.body.next)}`,
    );
    expect(rest.body.items).toHaveLength(1);
    expect(rest.body.next).toBeNull();
    const first = dead.body.items[0];
    const msg = await api(`/api/messages/${first.id}`);
    expect(msg.body).toMatchObject({ id: first.id, status: "dead", attempts: 2, replays: 0 });
    expect(msg.body.failures).toEqual([
      expect.objectContaining({ code: "E_JOB", attempt: 1 }),
      expect.objectContaining({ code: "E_JOB", attempt: 2 }),
    ]);

    // Dry run names what would go and changes nothing.
    const dry = await api("/api/signals/jobs.run/replay", {
      method: "POST",
      body: JSON.stringify({ all: true, dryRun: true }),
    });
    expect(dry.body).toMatchObject({ dryRun: true, count: 2 });
    expect((await api("/api/signals/jobs.run")).body.dead).toBe(2);

    delivered.push(-2); // the handler succeeds from now on for job 2
    const rep = await api("/api/signals/jobs.run/replay", {
      method: "POST",
      body: JSON.stringify({ ids: [first.id, "nope"] }),
    });
    expect(rep.body).toEqual({
      replayed: [first.id],
      count: 1,
      more: false,
      skipped: ["nope"],
      // As a discard's: who delivers what the replay made pending (this app's own worker, live).
      backlog: expect.objectContaining({ liveConsumer: true, declared: true }),
    });
    await app.idle();
    expect(delivered.filter((n) => n === 2)).toHaveLength(1);
    const after = await api(`/api/messages/${first.id}`);
    expect(after.body.status).toBe("delivered");
    expect(after.body.failures).toHaveLength(2); // history kept
    expect(after.body.replays).toBe(1);
    // Replaying it again does nothing: it is not dead any more.
    expect(
      (
        await api("/api/signals/jobs.run/replay", {
          method: "POST",
          body: JSON.stringify({ ids: [first.id] }),
        })
      ).body,
    ).toEqual({
      replayed: [],
      count: 0,
      more: false,
      skipped: [first.id],
      backlog: expect.objectContaining({ liveConsumer: true }),
    });

    const disc = await api("/api/signals/jobs.run/discard", {
      method: "POST",
      body: JSON.stringify({ all: true }),
    });
    expect(disc.body.discarded).toHaveLength(1);
    const audit = await api("/api/audit");
    expect(audit.body.items.map((a: { action: string }) => a.action)).toEqual([
      "discard",
      "replay",
      "replay",
      "replay",
    ]);
    expect(audit.body.items[0]).toMatchObject({ actor: "alice", target: "signal:jobs.run", at: time.now() });
    expect(JSON.stringify(audit.body)).not.toContain("fail");
  });

  it("a message's history names each attempt whose lease lapsed before it settled (lapsed), never the claim that found the budget spent; a replay starts the count again", async () => {
    const { app, api, time } = await start();
    const store = app.store;
    // No pool of this app claims this signal: the test claims it as workers would, then lets leases lapse.
    const signal = "jobs.unserved";
    const leaseMs = 30_000;
    const claim = async (worker: string) => {
      const [m] = await store.claim({ signal, worker, max: 1, now: time.now(), leaseMs });
      return m!;
    };
    const emit = (id: string) =>
      store.enqueue([{ id, signal, key: null, payload: { id }, parentRunId: null }], time.now());
    const lapsed = (attempt: number) => ({
      outcome: "lapsed",
      delivery: 0,
      attempt,
      message: `no outcome recorded — its lease (30 s) lapsed before it settled (handler crashed, hung or ran past the lease, its process died, or it never left the prefetch buffer); reclaimed as attempt ${attempt + 1}`,
    });

    // Killed (-9) while it ran attempt 1: reclaimed once after the lease, delivered by attempt 2.
    await emit("m_killed");
    expect((await claim("w1")).attempts).toBe(1);
    time.advance(leaseMs + 1);
    expect((await claim("w2")).attempts).toBe(2);
    await store.settle([{ id: "m_killed", worker: "w2", attempt: 2, status: "delivered" }], time.now());
    const killed = (await api("/api/messages/m_killed")).body;
    expect(killed).toMatchObject({ status: "delivered", attempts: 2, failures: [], lapsed: [1] });
    expect(killed.history).toEqual([lapsed(1)]);

    // retries 3: attempt 1 fails (recorded), attempts 2 to 4 outlive their lease, and claim 5 finds the
    // budget spent: dead with LEASE_EXPIRED for attempt 4. Claim 5 ran no handler: not lapsed.
    await emit("m_slow");
    const first = await claim("w1");
    await store.settle(
      [
        {
          id: "m_slow",
          worker: "w1",
          attempt: 1,
          status: "pending",
          failure: { code: "E_JOB", message: "broke", at: time.now(), attempt: 1 },
        },
      ],
      time.now(),
    );
    expect(first.attempts).toBe(1);
    for (let attempt = 2; attempt <= 4; attempt++) {
      expect((await claim(`w${attempt}`)).attempts).toBe(attempt);
      time.advance(leaseMs + 1);
    }
    const spent = await claim("w5");
    expect(spent.attempts).toBe(5);
    await store.settle(
      [spentSettlement(spent, { name: signal, retries: 3, deadLetter: true }, "w5", time.now())],
      time.now(),
    );
    const slow = (await api("/api/messages/m_slow")).body;
    expect(slow).toMatchObject({ status: "dead", attempts: 5, replays: 0, lapsed: [2, 3] });
    expect(slow.failures.map((f: Body) => [f.attempt, f.code])).toEqual([
      [1, "E_JOB"],
      [4, "LEASE_EXPIRED"],
    ]);
    expect(slow.history.map((e: Body) => [e.delivery, e.attempt, e.outcome])).toEqual([
      [0, 1, "failed"],
      [0, 2, "lapsed"],
      [0, 3, "lapsed"],
      [0, 4, "failed"],
    ]);
    expect(slow.history[1]).toEqual(lapsed(2));
    // The dead letters list carries the same, for `oke dead`.
    const listed = (await api(`/api/signals/${signal}/dead`)).body.items;
    expect(listed.map((m: Body) => [m.id, m.lapsed])).toEqual([["m_slow", [2, 3]]]);

    // Replayed: attempts count from 1 again. Attempt 1 of the new delivery lapses, attempt 2 is in
    // flight: its own lapse is the current delivery's, the earlier ones stay under the first delivery.
    expect(await store.replay(signal, ["m_slow"], time.now())).toEqual(["m_slow"]);
    expect((await claim("w6")).attempts).toBe(1);
    time.advance(leaseMs + 1);
    expect((await claim("w7")).attempts).toBe(2);
    const replayed = (await api("/api/messages/m_slow")).body;
    expect(replayed).toMatchObject({ status: "inflight", attempts: 2, replays: 1, lapsed: [1] });
    expect(replayed.history.map((e: Body) => [e.delivery, e.attempt, e.outcome])).toEqual([
      [0, 1, "failed"],
      [0, 2, "lapsed"],
      [0, 3, "lapsed"],
      [0, 4, "failed"],
      [1, 1, "lapsed"],
    ]);
    // It fails at attempt 2 now: the restart shows in the failures, and attempt 1 is still the lapsed one.
    await store.settle(
      [
        {
          id: "m_slow",
          worker: "w7",
          attempt: 2,
          status: "pending",
          failure: { code: "E_JOB", message: "broke again", at: time.now(), attempt: 2 },
        },
      ],
      time.now(),
    );
    const failedAgain = (await api("/api/messages/m_slow")).body;
    expect(failedAgain).toMatchObject({ status: "pending", attempts: 2, lapsed: [1] });
    expect(failedAgain.history.map((e: Body) => [e.delivery, e.attempt, e.outcome])).toEqual([
      [0, 1, "failed"],
      [0, 2, "lapsed"],
      [0, 3, "lapsed"],
      [0, 4, "failed"],
      [1, 1, "lapsed"],
      [1, 2, "failed"],
    ]);

    // A message whose handler failed on every attempt has nothing lapsed.
    await app.emit(jobs, { n: 7, fail: true }, { id: "m_failing" });
    await app.idle();
    const failing = (await api("/api/messages/m_failing")).body;
    expect(failing).toMatchObject({ status: "dead", attempts: 2, lapsed: [] });
    expect(failing.history.map((e: Body) => [e.delivery, e.attempt, e.outcome])).toEqual([
      [0, 1, "failed"],
      [0, 2, "failed"],
    ]);
  });

  it("a run taken over after its holder stopped renewing its lease explains its recoveries in one line, with durable.maxRecoveries", async () => {
    let store!: Store;
    const { api, time } = await start({ store: (s) => (store = s) });
    // A flow this app does not have, so none of its schedulers takes the run over itself.
    await store.startRun({
      id: "r-taken",
      flow: "retired.flow",
      input: null,
      parentRunId: null,
      owner: "dead/1",
      now: time.now(),
      leaseMs: 30_000,
    });
    expect((await api("/api/runs/r-taken")).body).toMatchObject({ recovered: null, maxRecoveries: 10 });
    time.advance(30_001);
    const taken = await store.acquireRun({
      runId: "r-taken",
      owner: "alive/1",
      now: time.now(),
      leaseMs: 30_000,
    });
    expect(taken.run.recoveries).toBe(1);
    const d = (await api("/api/runs/r-taken")).body;
    expect(d.run.recoveries).toBe(1);
    expect(d.recovered).toBe(
      'recovered 1 time (of at most 10: durable.maxRecoveries): its holder stopped renewing the lease (process killed, crashed or stalled) and another instance took the run over once it lapsed; the entry after a takeover includes that wait. The log line "durable run "r-taken" (retired.flow) taken over from <holder>" names the holder',
    );
  });

  it("replays at a rate: one batch per second of the app clock", async () => {
    const { app, api, time } = await start();
    for (let n = 10; n < 15; n++) await app.emit(jobs, { n, fail: true });
    await app.idle();
    for (let n = 10; n < 15; n++) delivered.push(-n);
    const res = await api("/api/signals/jobs.run/replay", {
      method: "POST",
      body: JSON.stringify({ all: true, rate: 2 }),
    });
    expect(res.status).toBe(202);
    expect(res.body.job).toMatchObject({ total: 5, rate: 2, state: "running" });
    await until(async () => (await api("/api/replays")).body.jobs[0].replayed === 2, "first batch");
    expect((await api("/api/signals/jobs.run")).body.dead).toBe(3);
    time.advance(1_000);
    await until(async () => (await api("/api/replays")).body.jobs[0].replayed === 4, "second batch");
    time.advance(1_000);
    await until(async () => (await api("/api/replays")).body.jobs[0].state === "done", "job done");
    await app.idle();
    expect((await api("/api/signals/jobs.run")).body).toMatchObject({ dead: 0, delivered: 5 });
  });

  it("replays at a fractional rate: 2.5 a second is 2 then 3; 0.5 a second is one every 2 s; refuses a rate below one an hour", async () => {
    const { app, api, time } = await start();
    const post = (body: unknown) =>
      api("/api/signals/jobs.run/replay", { method: "POST", body: JSON.stringify(body) });
    const jobOf = async (id: number) =>
      (await api("/api/replays")).body.jobs.find((j: { id: number }) => j.id === id);
    for (let n = 300; n < 305; n++) await app.emit(jobs, { n, fail: true });
    await app.idle();
    for (let n = 300; n < 305; n++) delivered.push(-n);
    const t0 = time.now();
    const fast = await post({ all: true, rate: 2.5 });
    expect(fast.status).toBe(202);
    expect(fast.body.job).toMatchObject({ total: 5, rate: 2.5 });
    const fastId: number = fast.body.job.id;
    await until(async () => {
      const j = await jobOf(fastId);
      return j.replayed === 2 && j.nextAt === t0 + 1_000;
    }, "first batch of 2");
    time.advance(1_000);
    await until(async () => (await jobOf(fastId)).state === "done", "the rest in the second second");
    expect(await jobOf(fastId)).toMatchObject({ replayed: 5, skipped: 0, nextAt: null });

    for (let n = 310; n < 312; n++) await app.emit(jobs, { n, fail: true });
    await app.idle();
    for (let n = 310; n < 312; n++) delivered.push(-n);
    const t1 = time.now();
    const slow = await post({ all: true, rate: 0.5 });
    expect(slow.status).toBe(202);
    const slowId: number = slow.body.job.id;
    await until(async () => {
      const j = await jobOf(slowId);
      return j.replayed === 1 && j.nextAt === t1 + 2_000;
    }, "the first one, the next due 2 s later");
    time.advance(1_000); // nothing is due yet: no timer fires
    expect(await jobOf(slowId)).toMatchObject({ replayed: 1, state: "running", nextAt: t1 + 2_000 });
    time.advance(1_000);
    await until(async () => (await jobOf(slowId)).state === "done", "the second one at 2 s");
    expect((await jobOf(slowId)).replayed).toBe(2);

    // 1e-300 and 1e-7 (a job that would never end, or end in months): below one an hour.
    for (const rate of [0, -1, "2", 20_000, 1e-300, 1e-7]) {
      const bad = await post({ all: true, rate });
      expect([rate, bad.status, bad.body.error?.code]).toEqual([rate, 400, "OKE1605"]);
    }
  });

  it("stops a paced replay: nothing more is sent, what was replayed stays; audited; an unknown job is a 404", async () => {
    const { app, api, time } = await start();
    const jobOf = async (id: number) =>
      (await api("/api/replays")).body.jobs.find((j: { id: number }) => j.id === id);
    // Numbers no other driver's run of this case used: `delivered` is shared by the module.
    const first = 1_000 + 10 * drivers.indexOf(driver);
    for (let n = first; n < first + 3; n++) await app.emit(jobs, { n, fail: true });
    await until(
      async () => (await api("/api/signals/jobs.run/dead")).body.items.length === 3,
      "three dead letters",
    );
    for (let n = first; n < first + 3; n++) delivered.push(-n);
    const started = await api("/api/signals/jobs.run/replay", {
      method: "POST",
      body: JSON.stringify({ all: true, rate: 0.5 }),
    });
    const id: number = started.body.job.id;
    await until(async () => (await jobOf(id)).replayed === 1, "the first one replayed");
    const stop = (job: string | number) => api(`/api/replays/${job}/stop`, { method: "POST" });
    const stopped = await stop(id);
    expect(stopped.status).toBe(200);
    expect(stopped.body).toMatchObject({
      stopped: true,
      job: { id, state: "stopped", replayed: 1, total: 3, nextAt: null },
    });
    time.advance("10s");
    await app.idle();
    expect(await jobOf(id)).toMatchObject({ state: "stopped", replayed: 1 });
    expect((await api("/api/signals/jobs.run/dead")).body.items).toHaveLength(2);
    // Stopping it again changes nothing and says so.
    expect((await stop(id)).body).toMatchObject({ stopped: false, job: { state: "stopped" } });
    for (const bad of [999, "abc"]) {
      const res = await stop(bad);
      expect([res.status, res.body.error?.code]).toEqual([404, "OKE1606"]);
    }
    const audit = (await api("/api/audit?limit=5")).body.items;
    expect(audit[0]).toMatchObject({
      action: "replay",
      target: "signal:jobs.run",
      detail: { job: id, stopped: true, replayed: 1, total: 3 },
    });
  });

  it("filters runs by sleep label in the query: matches from the first page, next cursors among them", async () => {
    const { app, api, time } = await start();
    await app.invoke(parent, { x: 1 });
    time.advance(10);
    await app.invoke(parent, { x: 2 });
    for (let i = 0; i < 4; i++) {
      time.advance(10);
      await app.invoke(napper, { x: i });
    }
    // Newer runs that are not asleep: on the old code they filled page 1, and the matches sat further on.
    for (let i = 0; i < 3; i++) {
      time.advance(10);
      await app.invoke(child, { x: i });
    }
    await app.idle();
    // The second slept 10 ms later, so it wakes 10 ms later: newest first.
    const payers = (await app.operator.sleepers())
      .filter((r) => r.flow === "trip.parent")
      .sort((a, b) => b.wakeAt - a.wakeAt)
      .map((r) => r.runId);
    expect(payers).toHaveLength(2);
    const first = await api("/api/runs?label=wait-for-payment&limit=1");
    expect(first.body.items.map((r: { id: string }) => r.id)).toEqual([payers[0]]);
    expect(first.body.items[0]).toMatchObject({ status: "sleeping", sleepingOn: "wait-for-payment" });
    expect(first.body.next).toEqual(expect.any(String));
    const second = await api(
      `/api/runs?label=wait-for-payment&limit=1&cursor=${encodeURIComponent(first.body.next)}`,
    );
    expect(second.body.items.map((r: { id: string }) => r.id)).toEqual([payers[1]]);
    expect(second.body.next).toBeNull();
    const naps: string[] = [];
    let cursor: string | null = null;
    for (let guard = 0; guard < 10; guard++) {
      const page: Body = await api(
        `/api/runs?label=nap&limit=3${cursor === null ? "" : `&cursor=${encodeURIComponent(cursor)}`}`,
      );
      expect(page.body.items.length).toBeGreaterThan(0);
      naps.push(...page.body.items.map((r: { id: string }) => r.id));
      cursor = page.body.next;
      if (cursor === null) break;
    }
    expect(naps).toHaveLength(4);
    expect((await api("/api/runs?label=nap&status=completed")).body.items).toEqual([]);
    // An empty filter field is no filter.
    expect((await api("/api/runs?label=&status=&limit=500")).body.items.length).toBeGreaterThanOrEqual(9);
  });

  it("all: true takes the oldest dead letters up to the cap, and says more remain: replay, paced replay, discard", async () => {
    const saved = replayLimits.all;
    replayLimits.all = 3;
    try {
      const { app, api, time } = await start();
      const post = (verb: string, body: unknown) =>
        api(`/api/signals/jobs.other/${verb}`, { method: "POST", body: JSON.stringify(body) });
      for (let n = 0; n < 5; n++) {
        time.advance(1_000);
        await app.emit(other, { n });
      }
      await app.idle();
      const oldest = (await api("/api/signals/jobs.other/dead?limit=5")).body.items.map(
        (m: { id: string }) => m.id,
      );
      expect(oldest).toHaveLength(5);

      const rep = await post("replay", { all: true });
      expect(rep.body).toEqual({
        replayed: oldest.slice(0, 3),
        count: 3,
        more: true,
        skipped: [],
        backlog: expect.objectContaining({ liveConsumer: true }),
      });
      await app.idle(); // they fail again (the handler always throws) and are dead once more
      const replays = await Promise.all(
        oldest.map(async (id: string) => (await api(`/api/messages/${id}`)).body.replays),
      );
      expect(replays).toEqual([1, 1, 1, 0, 0]);

      const paced = await post("replay", { all: true, rate: 10_000 });
      expect(paced.status).toBe(202);
      expect(paced.body).toMatchObject({ job: { total: 3 }, more: true });
      await until(
        async () => (await api("/api/replays")).body.jobs.every((j: { state: string }) => j.state === "done"),
        "the paced replay done",
      );
      await app.idle();

      const dry = await post("discard", { all: true, dryRun: true });
      expect(dry.body).toMatchObject({ count: 3, more: true, wouldDiscard: oldest.slice(0, 3) });
      const disc = await post("discard", { all: true });
      expect(disc.body).toEqual({
        discarded: oldest.slice(0, 3),
        count: 3,
        more: true,
        skipped: [],
        backlog: { pending: 0, inflight: 0, liveConsumer: true, declared: true },
      });
      expect((await api("/api/signals/jobs.other")).body.dead).toBe(2);
      const rest = await post("discard", { all: true });
      expect(rest.body).toEqual({
        discarded: oldest.slice(3),
        count: 2,
        more: false,
        skipped: [],
        backlog: { pending: 0, inflight: 0, liveConsumer: true, declared: true },
      });
    } finally {
      replayLimits.all = saved;
    }
  });

  it("discard names the ids it skipped (not dead letters of that signal), as replay does", async () => {
    const { app, api } = await start();
    await app.emit(other, { n: 1 });
    await app.idle();
    const [dead] = (await api("/api/signals/jobs.other/dead")).body.items.map((m: { id: string }) => m.id);
    const post = (verb: string, body: unknown) =>
      api(`/api/signals/jobs.other/${verb}`, { method: "POST", body: JSON.stringify(body) });
    expect((await post("discard", { ids: [dead, "nope1"], dryRun: true })).body).toMatchObject({
      wouldDiscard: [dead],
      skipped: ["nope1"],
    });
    expect((await post("discard", { ids: ["nope1", dead, "nope2"] })).body).toEqual({
      discarded: [dead],
      count: 1,
      more: false,
      skipped: ["nope1", "nope2"],
      backlog: { pending: 0, inflight: 0, liveConsumer: true, declared: true },
    });
  });

  it("answers 503 OKE1610 with Retry-After while the store reports itself unavailable, not 500", async () => {
    let down = false;
    let failing = false;
    // The store's health as a driver reports it: a call that fails for want of the database turns it.
    const outage = (s: Store): Store =>
      new Proxy(s, {
        get(target, prop) {
          if (prop === "health")
            return () =>
              down ? { ok: false, since: Date.UTC(2026, 11, 3), reason: "ECONNREFUSED" } : { ok: true };
          const v: unknown = Reflect.get(target, prop, target);
          if (typeof v !== "function") return v;
          if (prop === "pageRuns")
            return (...args: unknown[]) => {
              if (!failing) return (v as (...a: unknown[]) => unknown).apply(target, args);
              down = true;
              return Promise.reject(new Error("connection terminated unexpectedly"));
            };
          return (v as (...a: unknown[]) => unknown).bind(target);
        },
      });
    const { url, api } = await start({ store: outage });
    expect((await api("/api/overview")).status).toBe(200);

    // A call that fails as the store goes down.
    failing = true;
    const cut = await fetch(`${url}/api/runs`, { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(cut.status).toBe(503);
    expect(cut.headers.get("retry-after")).toBe("2");
    expect(((await cut.json()) as Body).error).toMatchObject({
      code: "OKE1610",
      message: "console: the app's store is unavailable (since 2026-12-03T00:00:00.000Z); try again in 2 s",
    });
    // While it says it is down, every endpoint that needs it answers so at once.
    failing = false;
    for (const path of ["/api/overview", "/api/signals/jobs.run/dead", "/api/schedules"]) {
      const r = await api(path);
      expect([path, r.status, r.body.error?.code]).toEqual([path, 503, "OKE1610"]);
    }
    const replay = await api("/api/signals/jobs.run/replay", {
      method: "POST",
      body: JSON.stringify({ all: true }),
    });
    expect(replay.status).toBe(503);
    // Who you are needs no store; a missing token is still a 401 first.
    expect((await api("/api/whoami")).status).toBe(200);
    expect((await api("/api/overview", { token: null })).status).toBe(401);
    down = false;
    expect((await api("/api/overview")).status).toBe(200);
  });

  it("overview: recent failures are the newest dead letters of all signals, newest first", async () => {
    const { app, api, time } = await start();
    for (let n = 200; n < 212; n++) {
      time.advance(1_000);
      if (n % 2 === 0) await app.emit(jobs, { n, fail: true });
      else await app.emit(other, { n });
    }
    await app.idle();
    const ov = await api("/api/overview");
    const dead = ov.body.recentFailures.deadLetters;
    expect(dead.map((m: { payload: { n: number } }) => m.payload.n)).toEqual([
      211, 210, 209, 208, 207, 206, 205, 204, 203, 202,
    ]);
    expect(dead[0]).toMatchObject({ signal: "jobs.other", status: "dead", replays: 0 });
    expect(dead[1]).toMatchObject({ signal: "jobs.run", status: "dead" });
  });

  it("a broadcast subscriber that always fails: its copies count as failed (not only delivered, exactly, past the newest 100), its newest failures are recent failures, and its copies queue can be read", async () => {
    const { app, api, time } = await start({ modules: { newsBreaker } });
    for (let n = 1; n <= 140; n++) {
      time.advance(10);
      await app.emit(news, { n });
    }
    await app.idle();
    const breaks = broadcastQueue("news.posted", "news.break");
    const reads = broadcastQueue("news.posted", "news.read");
    const sig = await api(`/api/signals/news.posted`);
    expect(sig.status).toBe(200);
    expect(sig.body.copies).toEqual([
      expect.objectContaining({ flow: "news.break", queue: breaks, delivered: 140, dead: 0, failed: 140 }),
      expect.objectContaining({ flow: "news.read", queue: reads, delivered: 140, failed: 0 }),
    ]);
    // The driver counts them (stats' deliveredFailed): exact, so no "among the newest" bound.
    expect(sig.body.copies.map((c: Body) => c.failedOf)).toEqual([undefined, undefined]);
    expect(sig.body.failedCopies).toBeUndefined();

    const ov = await api("/api/overview");
    expect(ov.body.signals.find((x: Body) => x.name === "news.posted").copies[0]).toMatchObject({
      failed: 140,
    });
    const copies = ov.body.recentFailures.copies;
    expect(copies).toHaveLength(10);
    expect(copies[0]).toMatchObject({
      signal: breaks,
      status: "delivered",
      attempts: 1,
      copyOf: { signal: "news.posted", flow: "news.break" },
      failures: [expect.objectContaining({ code: "E_NEWS", attempt: 1 })],
    });
    expect(copies.every((m: Body) => /^news \d+ broke$/.test(m.failures[0].message))).toBe(true);

    // The copies queue reads like a queue: its detail says whose copies it holds, its messages page.
    const q = await api(`/api/signals/${encodeURIComponent(breaks)}`);
    expect(q.status).toBe(200);
    expect(q.body).toMatchObject({
      name: breaks,
      delivery: "copies",
      copiesOf: { signal: "news.posted", flow: "news.break" },
      delivered: 140,
      failed: 140,
    });
    expect(q.body).not.toHaveProperty("failedOf");
    const msgs = await api(`/api/signals/${encodeURIComponent(breaks)}/messages?status=delivered&limit=5`);
    expect(msgs.status).toBe(200);
    expect(msgs.body.items).toHaveLength(5);
    expect(msgs.body.items[0].failures[0].code).toBe("E_NEWS");
    // Nothing is acted on there: a copy is one attempt the runtime settles.
    const replay = await api(`/api/signals/${encodeURIComponent(breaks)}/replay`, {
      method: "POST",
      body: JSON.stringify({ all: true }),
    });
    expect(replay.status).toBe(404);
  });

  it("a driver whose stats do not count failed deliveries: failed copies are counted among the newest 100 delivered, and failedOf says so", async () => {
    // A third-party driver from before deliveredFailed: stats without it.
    const older = (s: Store): Store =>
      new Proxy(s, {
        get: (t, k) =>
          k === "stats"
            ? async (signal: string, now: number) => {
                const { deliveredFailed: _d, ...rest } = await t.stats(signal, now);
                return rest;
              }
            : Reflect.get(t, k),
      });
    const { app, api, time } = await start({ modules: { newsBreaker }, store: older });
    for (let n = 1; n <= 110; n++) {
      time.advance(10);
      await app.emit(news, { n });
    }
    await app.idle();
    const sig = await api(`/api/signals/news.posted`);
    expect(sig.body.copies).toEqual([
      expect.objectContaining({ flow: "news.break", delivered: 110, failed: 100, failedOf: 100 }),
      expect.objectContaining({ flow: "news.read", delivered: 110, failed: 0, failedOf: 100 }),
    ]);
  });

  it("the messages of a live or broadcast signal: 404 OKE1613 naming what it has instead of a queue, not OKE1605", async () => {
    const { api } = await start();
    const live = await api("/api/signals/ticker.moved/messages");
    expect(live.status).toBe(404);
    expect(live.body.error.code).toBe("OKE1613");
    expect(live.body.error.message).toMatch(
      /^console: "ticker\.moved" is a live signal: it keeps a tape of entries, not a queue/,
    );
    expect(live.body.error.message).not.toContain("broadcast");
    const broadcast = await api("/api/signals/news.posted/messages");
    expect(broadcast.status).toBe(404);
    expect(broadcast.body.error.code).toBe("OKE1613");
    expect(broadcast.body.error.message).toContain('"news.posted" is a broadcast signal');
    expect(broadcast.body.error.message).toContain("copies[].queue");
  });

  it("a message says whether its emitter is a stored run (parentRunFound): a plain flow's invocation is not; lists do not look it up", async () => {
    const { app, api } = await start();
    await app.invoke(plainEmitter, { n: 1 });
    await app.invoke(durableEmitter, { n: 2 });
    await app.emit(other, { n: 3 });
    await app.idle();
    const dead = (await api("/api/signals/jobs.other/dead")).body.items as Body[];
    const byN = new Map(dead.map((m) => [m.payload.n as number, m]));
    expect([...byN.keys()].sort()).toEqual([1, 2, 3]);
    // Lists carry parentRunId as they did, with no per-row run lookup.
    for (const m of dead) expect(m).not.toHaveProperty("parentRunFound");

    const plain = (await api(`/api/messages/${byN.get(1)!.id}`)).body;
    expect(plain.parentRunId).toEqual(expect.any(String));
    expect(plain.parentRunFound).toBe(false);
    expect((await api(`/api/runs/${encodeURIComponent(plain.parentRunId)}`)).status).toBe(404);

    const durable = (await api(`/api/messages/${byN.get(2)!.id}`)).body;
    expect(durable.parentRunFound).toBe(true);
    const run = await api(`/api/runs/${encodeURIComponent(durable.parentRunId)}`);
    expect([run.status, run.body.run.flow]).toEqual([200, "trip.durableEmit"]);

    const direct = (await api(`/api/messages/${byN.get(3)!.id}`)).body;
    expect([direct.parentRunId, direct.parentRunFound]).toEqual([null, false]);
  });

  it("every paged list refuses a cursor that is not a previous page's next (400 OKE1605 naming it), rather than restarting at page 1", async () => {
    const { app, api } = await start();
    for (let n = 0; n < 3; n++) await app.invoke(napper, { x: n });
    for (let n = 0; n < 3; n++) await app.emit(jobs, { n: 700 + n, fail: n > 0 });
    await app.idle();
    const paged = [
      "/api/runs?limit=1",
      "/api/signals/jobs.run/messages?status=delivered&limit=1",
      "/api/signals/jobs.run/messages?status=pending&limit=1",
      "/api/signals/jobs.run/messages?status=dead&limit=1",
      "/api/signals/jobs.run/dead?limit=1",
      "/api/audit?limit=1",
    ];
    // Each of them takes its own next back; an empty cursor is refused (a script whose cursor came
    // out empty would start again at page 1, forever), while no cursor at all is the first page.
    for (const path of paged) {
      const first = await api(path);
      expect([path, first.status]).toEqual([path, 200]);
      if (first.body.next !== null) {
        const second = await api(`${path}&cursor=${encodeURIComponent(first.body.next)}`);
        expect([path, second.status]).toEqual([path, 200]);
      }
      const empty = await api(`${path}&cursor=`);
      expect([path, empty.status, empty.body.error?.code, empty.body.error?.message]).toEqual([
        path,
        400,
        "OKE1605",
        'console: cursor is empty: pass the "next" of a previous page, or leave cursor out for the first page',
      ]);
    }
    const runsNext = (await api("/api/runs?limit=1")).body.next as string;
    const deadNext = (await api("/api/signals/jobs.run/dead?limit=1")).body.next as string;
    const bad: Array<[string, string]> = [
      ...paged.map((path): [string, string] => [path, "garbage"]),
      ["/api/runs?limit=1", "x.y"],
      ["/api/runs?limit=1", "12."],
      ["/api/runs?limit=1", ".r_1"],
      ["/api/runs?limit=1", "1e3.r_1"],
      // A run listing's cursor is no message listing's: its second part is a run id, not a seq.
      ["/api/signals/jobs.run/dead?limit=1", runsNext],
      ["/api/signals/jobs.run/messages?status=delivered&limit=1", "1700000000000.x"],
      ["/api/audit?limit=1", deadNext],
    ];
    for (const [path, cursor] of bad) {
      const r = await api(`${path}&cursor=${encodeURIComponent(cursor)}`);
      expect([path, cursor, r.status, r.body.error]).toEqual([
        path,
        cursor,
        400,
        {
          code: "OKE1605",
          message: `console: cursor must be the "next" of a previous page, got "${cursor}"`,
        },
      ]);
    }
  });

  it("a run whose parent is no stored run (a plain flow's invocation) says so: parentRunFound false, and the id the chain stops at", async () => {
    const { app, api } = await start({ modules: { relayWorker, plainRelay } });
    await app.invoke(plainRelay, { n: 1 });
    await app.idle();
    const consumer = (await api("/api/runs?flow=jobs.relayWork")).body.items[0];
    expect(consumer.parentRunId).toEqual(expect.any(String));
    const invocation = consumer.parentRunId as string;
    expect((await api(`/api/runs/${encodeURIComponent(invocation)}`)).status).toBe(404);

    const detail = (await api(`/api/runs/${encodeURIComponent(consumer.id)}`)).body;
    expect(detail.ancestors).toEqual([]);
    expect([detail.parentRunFound, detail.unstoredParentId]).toEqual([false, invocation]);
    // Its child's parent is stored (the consumer's run); the chain stops past it, at the invocation.
    const callee = (await api(`/api/runs?parent=${encodeURIComponent(consumer.id)}`)).body.items[0];
    const calleeDetail = (await api(`/api/runs/${encodeURIComponent(callee.id)}`)).body;
    expect(calleeDetail.ancestors.map((a: { id: string }) => a.id)).toEqual([consumer.id]);
    expect([calleeDetail.parentRunFound, calleeDetail.unstoredParentId]).toEqual([true, invocation]);
    // A run started directly has no parent at all: nothing is missing.
    await app.invoke(napper, { x: 1 });
    const root = (await api("/api/runs?flow=trip.napper")).body.items[0];
    const rootDetail = (await api(`/api/runs/${encodeURIComponent(root.id)}`)).body;
    expect([rootDetail.run.parentRunId, rootDetail.parentRunFound, rootDetail.unstoredParentId]).toEqual([
      null,
      false,
      null,
    ]);
  });

  it("a run's timeline links every call to its own child and every emit to its message's status, past 200 of each; broadcast and live emits carry an event id, no message link", async () => {
    const { app, api } = await start();
    await app.invoke(many, { calls: 201 });
    await app.idle();
    const runId = (await api("/api/runs?flow=trip.many")).body.items[0].id;
    const detail = await api(`/api/runs/${runId}?timeline=all`);
    expect(detail.status).toBe(200);
    const tl: Body[] = detail.body.timeline;
    const calls = tl.filter((e) => e.kind === "call");
    expect(calls).toHaveLength(201);
    for (const c of calls) expect([c.seq, c.childRunId]).toEqual([c.seq, `${runId}.${c.seq}`]);
    expect(detail.body.moreChildren).toBe(false);
    expect(new Set(detail.body.children.map((c: { id: string }) => c.id))).toEqual(
      new Set(calls.map((c) => c.childRunId)),
    );
    // The link leads to the child that call started: its input says which call it was.
    for (const i of [0, 100, 199, 200]) {
      const childRun = await api(`/api/runs/${calls[i].childRunId}`);
      expect([i, childRun.body.run.input]).toEqual([i, { x: i }]);
    }
    const onceEmits = tl.filter((e) => e.kind === "emit" && e.name === "jobs.run");
    expect(onceEmits).toHaveLength(201);
    for (const e of onceEmits)
      expect([e.seq, e.delivery, e.messageStatus, typeof e.messageId]).toEqual([
        e.seq,
        "once",
        "delivered",
        "string",
      ]);
    const broadcast = tl.find((e) => e.kind === "emit" && e.name === "news.posted");
    expect(broadcast).toMatchObject({ delivery: "broadcast", eventId: expect.any(String) });
    expect(broadcast).not.toHaveProperty("messageId");
    expect(broadcast).not.toHaveProperty("messageStatus");
    const live = tl.find((e) => e.kind === "emit" && e.name === "ticker.moved");
    expect(live).toMatchObject({ delivery: "live", eventId: expect.any(String) });
    expect(live).not.toHaveProperty("messageId");
  });

  // Memory only: 1 001 child runs take seconds on the other drivers and test the same API code.
  if (driver.name === "memory")
    it("past 1 000 children, the detail lists the newest 1 000, says there are more, and still links every call", async () => {
      const { app, api } = await start();
      await app.invoke(many, { calls: 1_001 });
      await app.idle();
      const runId = (await api("/api/runs?flow=trip.many")).body.items[0].id;
      const detail = await api(`/api/runs/${runId}?timeline=all`);
      expect(detail.body.children).toHaveLength(1_000);
      expect(detail.body.moreChildren).toBe(true);
      const calls = detail.body.timeline.filter((e: Body) => e.kind === "call");
      expect(calls).toHaveLength(1_001);
      for (const c of calls) expect([c.seq, c.childRunId]).toEqual([c.seq, `${runId}.${c.seq}`]);
    });

  it("lists runs by status and flow with paging; a run's timeline links emits, calls and children; wake early completes it", async () => {
    const { app, api } = await start();
    await app.invoke(parent, { x: 1 });
    await app.idle();
    const sleeping = await api("/api/runs?status=sleeping");
    expect(sleeping.body.items).toHaveLength(1);
    const run = sleeping.body.items[0];
    expect(run).toMatchObject({ flow: "trip.parent", status: "sleeping", sleepingOn: "wait-for-payment" });
    expect(
      (await api("/api/runs?label=wait-for-payment")).body.items.map((r: { id: string }) => r.id),
    ).toEqual([run.id]);
    const all = await api("/api/runs?limit=1");
    expect(all.body.items).toHaveLength(1);
    const page2 = await api(`/api/runs?limit=1&cursor=${encodeURIComponent(all.body.next)}`);
    expect(new Set([all.body.items[0].id, page2.body.items[0].id])).toEqual(
      new Set([run.id, expect.any(String)]),
    );
    expect((await api("/api/runs?flow=trip.child")).body.items).toHaveLength(1);

    const detail = await api(`/api/runs/${run.id}`);
    const tl = detail.body.timeline;
    const kinds = tl.map((e: { kind: string }) => e.kind);
    expect(kinds).toContain("step");
    expect(kinds.at(-1)).toBe("sleep");
    expect(tl.find((e: { kind: string }) => e.kind === "step")).toMatchObject({
      name: "book",
      preview: '{"seat":"12A"}',
    });
    const emit = tl.find((e: { kind: string }) => e.kind === "emit");
    expect(emit).toMatchObject({
      name: "jobs.run",
      messageId: expect.any(String),
      messageStatus: "delivered",
    });
    const call = tl.find((e: { kind: string }) => e.kind === "call");
    expect(detail.body.children).toHaveLength(1);
    expect(call.childRunId).toBe(detail.body.children[0].id);
    expect(tl.at(-1)).toMatchObject({
      label: "wait-for-payment",
      wakeAt: expect.any(Number),
      duration: "1h",
    });
    const childDetail = await api(`/api/runs/${call.childRunId}`);
    expect(childDetail.body.ancestors.map((a: { id: string }) => a.id)).toEqual([run.id]);
    expect((await api(`/api/messages/${emit.messageId}`)).body.parentRunId).toBe(run.id);

    const woke = await api(`/api/runs/${run.id}/wake`, { method: "POST" });
    expect(woke.body).not.toHaveProperty("error");
    expect(woke.status).toBe(200);
    expect(woke.body).toMatchObject({ runId: run.id });
    await until(
      async () => (await api(`/api/runs/${run.id}`)).body.run.status === "completed",
      "run completed",
    );
    const again = await api(`/api/runs/${run.id}/wake`, { method: "POST" });
    // Not asleep any more: the spec's ClockResourceNotFoundError, as for an id that does not exist.
    expect(again.status).toBe(404);
    expect(again.body.error).toMatchObject({
      code: "ClockResourceNotFoundError",
      message: `run "${run.id}" not found`,
      // The message is the spec's; the fix says the run is there, just not asleep.
      fix: `"Not found" means no sleeping run "${run.id}": it exists but is completed, and only a sleeping run can be woken (oke run ${run.id} shows where it is).`,
    });
    const missing = await api(`/api/runs/nope/wake`, { method: "POST" });
    expect(missing.status).toBe(404);
    expect(missing.body.error).toMatchObject({
      code: "ClockResourceNotFoundError",
      message: 'run "nope" not found',
    });
    expect(missing.body.error).not.toHaveProperty("fix");
    expect((await api("/api/audit")).body.items[0]).toMatchObject({
      action: "wake",
      target: `run:${run.id}`,
      actor: "alice",
    });
  });

  it("a run held back (its journal no longer matches the code) carries held in every run summary; ?held=true lists only such runs; the overview's heldBack says what to do", async () => {
    const childNow = heldChild("b");
    let store!: Store;
    const { api, app, time } = await start({
      store: (s) => (store = s),
      modules: { heldParentNow: heldParent(childNow), childNow },
    });
    // Nothing held back: the overview's section is empty, the filter finds nothing.
    expect((await api("/api/overview")).body.heldBack).toEqual({
      runs: [],
      more: false,
      fix: "Each waits with no holder, untouched, until an instance takes it again.",
      allCounted: true,
    });

    // The previous version started the run and parked its child, then was replaced.
    const childThen = heldChild("a");
    const previous = createApp({
      modules: [{ parentThen: heldParent(childThen), childThen }],
      env: "test",
      clock: time,
      store,
    });
    await previous.start({ port: 0, host: "127.0.0.1" });
    await previous.invoke(heldParent(childThen), { x: 1 });
    await previous.stop({ timeoutMs: 2_000 });
    const [parentRun] = (await api("/api/runs?flow=held.parent")).body.items;
    expect(parentRun).toMatchObject({ status: "completed" });
    expect(parentRun).not.toHaveProperty("held");
    const childId = `${parentRun.id}.0`;
    expect((await store.getRun(childId))?.status).toBe("sleeping");

    time.advance(60_000);
    await until(async () => (await store.getRun(childId))?.held !== undefined, "the child held back");
    await app.idle();
    const message = `journal: run "${childId}" recorded step "a" at position 0, but the code now asks for step "b"`;
    const held = { code: "OKE1301", message, since: time.now() };

    const only = await api("/api/runs?held=true");
    expect(only.status).toBe(200);
    expect(only.body.items).toEqual([
      expect.objectContaining({ id: childId, flow: "held.child", status: "running", held }),
    ]);
    // Every list's summary carries it: all runs, a parent's children, a child's detail.
    const all = (await api("/api/runs")).body.items as Body[];
    expect(all.find((r) => r.id === childId)).toMatchObject({ held });
    expect(all.filter((r) => r.held !== undefined).map((r) => r.id)).toEqual([childId]);
    expect((await api("/api/runs?held=")).body.items.length).toBe(all.length);
    const parentDetail = (await api(`/api/runs/${parentRun.id}`)).body;
    expect(parentDetail.children).toEqual([expect.objectContaining({ id: childId, held })]);
    expect(parentDetail.heldFix).toBeNull();
    const childDetail = (await api(`/api/runs/${childId}`)).body;
    expect(childDetail.run).toMatchObject({ status: "running", leaseOwner: null, held });
    expect(childDetail.heldFix).toBe(MISMATCH_FIX);
    expect(childDetail.ancestors).toEqual([expect.objectContaining({ id: parentRun.id })]);
    expect(childDetail.ancestors[0]).not.toHaveProperty("held");

    const overview = (await api("/api/overview")).body;
    expect(overview.heldBack).toEqual({
      runs: [expect.objectContaining({ id: childId, flow: "held.child", held })],
      more: false,
      fix: MISMATCH_FIX,
      allCounted: true,
    });
    // Held back, as its flow's count says (its `runs` may be a shared read made a moment before).
    expect(overview.flows.find((f: { name: string }) => f.name === "held.child").held).toEqual({
      running: 1,
    });
    // The words of the log line: what happens to the run, and what to do.
    expect(MISMATCH_FIX).toBe(
      "It is tried again every 30 s and goes on once an instance runs the code that wrote its journal: " +
        "finish the rolling deploy, or revert the change to the flow (steps, sleeps, emits and ids before a run's position must keep their order and names). " +
        "If the change is meant to stay, end such runs with `oke terminate <id>` (their undos do not run).",
    );

    for (const bad of ["yes", "false", "1"]) {
      const r = await api(`/api/runs?held=${bad}`);
      expect([r.status, r.body.error?.code]).toEqual([400, "OKE1605"]);
      expect(r.body.error.message).toBe(
        `console: held must be true (only runs held back) or left out, got "${bad}"`,
      );
    }
  });

  it("GET /api/runs?flow= says whether the app has that flow (flowKind), and names its durable flows when it has not", async () => {
    const { api } = await start();
    const missing = (await api("/api/runs?flow=trip.nosuch")).body;
    expect(missing).toMatchObject({ items: [], next: null, flowKind: "none" });
    expect(missing.durableFlows).toEqual(expect.arrayContaining(["trip.parent", "trip.many", "trip.napper"]));
    expect(missing.durableFlows).not.toContain("trip.plainEmit");
    expect((await api("/api/runs?flow=trip.plainEmit")).body).toEqual({
      items: [],
      next: null,
      flowKind: "plain",
    });
    const durable = (await api("/api/runs?flow=trip.parent")).body;
    expect(durable.flowKind).toBe("durable");
    expect(durable).not.toHaveProperty("durableFlows");
    // No flow filter: the answer's shape is as before.
    expect(Object.keys((await api("/api/runs")).body).sort()).toEqual(["items", "next"]);
  });

  it("each reason a run is held back for gets its own advice: the run's heldFix, and the overview's fix names each code when runs wait for different ones", async () => {
    let store!: Store;
    const { api, time } = await start({ store: (s) => (store = s) });
    // Flows this app does not have, so none of its schedulers takes the runs while the test reads them.
    const give = async (id: string, hold: { code: string; message: string }) => {
      await store.startRun({
        id,
        flow: "retired.flow",
        input: null,
        parentRunId: null,
        owner: "old/1",
        now: time.now(),
        leaseMs: 30_000,
      });
      await store.releaseRun({
        runId: id,
        owner: "old/1",
        now: time.now(),
        retryAt: time.now() + 5_000,
        hold,
      });
    };
    const gone = unknownFlowHold({ id: "r-gone", flow: "retired.flow" }, "inst-old");
    expect(gone.message).toBe(
      'durable run "r-gone": flow "retired.flow" is not in the app of instance inst-old, which took it; left for an instance that has it',
    );
    await give("r-gone", gone);
    const gone2 = (await api("/api/runs/r-gone")).body;
    expect(gone2.run.held).toEqual({ ...gone, since: time.now() });
    expect(gone2.heldFix).toBe(UNKNOWN_FLOW_FIX);
    expect((await api("/api/overview")).body.heldBack.fix).toBe(UNKNOWN_FLOW_FIX);

    time.advance(1_000);
    await give("r-mismatch", { code: "OKE1301", message: "journal: mismatch" });
    await give("r-other", { code: "X42", message: "a third-party driver's reason" });
    expect((await api("/api/runs/r-other")).body.heldFix).toBeNull();
    const overview = (await api("/api/overview")).body.heldBack;
    expect(overview.runs.map((r: Body) => r.id).sort()).toEqual(["r-gone", "r-mismatch", "r-other"]);
    // Newest first, each advice once; a code with none adds nothing.
    expect(overview.fix).toBe(`OKE1301: ${MISMATCH_FIX} OKE1307: ${UNKNOWN_FLOW_FIX}`);
  });

  it("the overview lists the newest 20 held-back runs and says when there are more", async () => {
    let store!: Store;
    const { api, time } = await start({ store: (s) => (store = s) });
    // Held back as the runtime leaves such a run: started, then released with the reason.
    const hold = { code: "OKE1301", message: "journal: the code changed" };
    for (let i = 0; i < 21; i++) {
      const id = `held-${String(i).padStart(2, "0")}`;
      time.advance(1_000);
      await store.startRun({
        id,
        flow: "held.gone",
        input: {},
        parentRunId: null,
        owner: "old/1",
        leaseMs: 30_000,
        now: time.now(),
      });
      await store.releaseRun({ runId: id, owner: "old/1", now: time.now(), hold });
    }
    const overview = (await api("/api/overview")).body;
    expect(overview.heldBack.more).toBe(true);
    expect(overview.heldBack.runs.map((r: { id: string }) => r.id)).toEqual(
      Array.from({ length: 20 }, (_, i) => `held-${String(20 - i).padStart(2, "0")}`),
    );
  });

  it("the overview counts each flow's held-back runs (held, by status, within runs); past the count's cap allCounted is false", async () => {
    let store!: Store;
    const { api, time } = await start({ store: (s) => (store = s) });
    // Runs of a flow this app has, given back with a reason and a retry an hour away: no instance
    // takes them while the test reads (the clock does not move).
    const hold = { code: "OKE1301", message: "journal: the code changed" };
    for (let i = 0; i < 25; i++) {
      const id = `nap-held-${String(i).padStart(2, "0")}`;
      await store.startRun({
        id,
        flow: "trip.napper",
        input: {},
        parentRunId: null,
        owner: "old/1",
        leaseMs: 30_000,
        now: time.now(),
      });
      await store.releaseRun({
        runId: id,
        owner: "old/1",
        now: time.now(),
        retryAt: time.now() + 3_600_000,
        hold,
      });
    }
    const napperOf = (o: Body) => o.flows.find((f: { name: string }) => f.name === "trip.napper");
    const overview = (await api("/api/overview")).body;
    expect(napperOf(overview)).toMatchObject({ runs: { running: 25 }, held: { running: 25 } });
    expect(overview.heldBack).toMatchObject({ more: true, allCounted: true });
    // A flow with none: an empty count.
    expect(overview.flows.find((f: { name: string }) => f.name === "trip.parent").held).toEqual({});

    const saved = heldLimits.counted;
    heldLimits.counted = 22;
    try {
      const capped = (await api("/api/overview")).body;
      expect(napperOf(capped).held).toEqual({ running: 22 });
      expect(capped.heldBack.allCounted).toBe(false);
    } finally {
      heldLimits.counted = saved;
    }
  });

  it("a run's detail says whether it is stranded (no live instance has its flow), with what to do, and the app's clock", async () => {
    let store!: Store;
    const { app, api, time } = await start({ store: (s) => (store = s) });
    await app.invoke(napper, { x: 1 });
    const [nap] = (await api("/api/runs?flow=trip.napper")).body.items;
    const live = (await api(`/api/runs/${nap.id}`)).body;
    expect(live).toMatchObject({ now: time.now(), stranded: false });
    expect(live).not.toHaveProperty("strandedFix");
    // A run of a flow no instance has (removed by a deploy), given back with no holder.
    await store.startRun({
      id: "r-retired",
      flow: "retired.flow",
      input: null,
      parentRunId: null,
      owner: "old/1",
      now: time.now(),
      leaseMs: 30_000,
    });
    await store.releaseRun({ runId: "r-retired", owner: "old/1", now: time.now() });
    const retired = (await api("/api/runs/r-retired")).body;
    expect(retired).toMatchObject({
      stranded: true,
      strandedFix:
        "It resumes where it stopped once an instance that has the flow runs (deploy it again). " +
        "If the flow was removed on purpose, end the run with oke terminate r-retired (its undos do not run).",
    });
    // A finished run waits for no one, whatever its flow.
    await store.terminateRun?.({ runId: "r-retired", now: time.now(), error: { code: "X", message: "x" } });
    expect((await api("/api/runs/r-retired")).body.stranded).toBe(false);
  });

  it("a discard answers the queue's messages that are not dead letters (backlog): how many, whether a live instance consumes the signal, whether the app declares it", async () => {
    const { app, api } = await start({ modules: { orphanJobs } });
    for (let n = 0; n < 2; n++) await app.emit(orphanJobs, { n });
    const post = (signal: string, body: unknown) =>
      api(`/api/signals/${signal}/discard`, { method: "POST", body: JSON.stringify(body) });
    const all = await post("jobs.orphan", { all: true });
    expect(all.body).toEqual({
      discarded: [],
      count: 0,
      more: false,
      skipped: [],
      backlog: { pending: 2, inflight: 0, liveConsumer: false, declared: true },
    });
    expect((await post("jobs.orphan", { all: true, dryRun: true })).body.backlog).toEqual({
      pending: 2,
      inflight: 0,
      liveConsumer: false,
      declared: true,
    });
    // The messages are untouched: discard removes dead letters only.
    expect((await api("/api/signals/jobs.orphan")).body.pending).toBe(2);
  });

  it("discard-pending removes a queue's pending messages (a signal no longer in the code too), never inflight ones or dead letters; dry run, skipped ids, audit", async () => {
    const { app, api, time } = await start();
    const store = app.store;
    // A signal this app does not declare and nothing consumes: its queue is what a removed worker left.
    const signal = "jobs.gone";
    await store.enqueue(
      ["g1", "g2", "g3", "g4"].map((id) => ({ id, signal, key: null, payload: { id }, parentRunId: null })),
      time.now(),
    );
    const [held] = await store.claim({ signal, worker: "w", max: 1, now: time.now(), leaseMs: 30_000 });
    expect(held!.id).toBe("g1");
    const [dying] = await store.claim({ signal, worker: "w", max: 1, now: time.now(), leaseMs: 30_000 });
    await store.settle(
      [
        {
          id: dying!.id,
          worker: "w",
          attempt: 1,
          status: "dead",
          failure: { code: "E", message: "x", at: time.now(), attempt: 1 },
        },
      ],
      time.now(),
    );
    const post = (body: unknown, which = "discard-pending") =>
      api(`/api/signals/${signal}/${which}`, { method: "POST", body: JSON.stringify(body) });

    const dry = await post({ all: true, dryRun: true });
    expect(dry.status).toBe(200);
    expect(dry.body).toMatchObject({
      dryRun: true,
      pending: true,
      wouldDiscard: ["g3", "g4"],
      count: 2,
      more: false,
      skipped: [],
      backlog: { pending: 2, inflight: 1, declared: false },
    });
    expect((await api(`/api/signals/${signal}`)).body.pending).toBe(2);

    const named = await post({ ids: ["g4", "g1", "g2", "nope"] });
    expect(named.body).toMatchObject({
      pending: true,
      discarded: ["g4"],
      count: 1,
      more: false,
      skipped: ["g1", "g2", "nope"],
      backlog: { pending: 1, inflight: 1 },
    });
    expect((await post({ all: true })).body).toMatchObject({ discarded: ["g3"], count: 1 });
    expect(await store.getMessage("g3")).toBeUndefined();
    expect(await store.getMessage("g1")).toMatchObject({ status: "inflight" });
    expect(await store.getMessage("g2")).toMatchObject({ status: "dead" });
    // Plain discard is unchanged: dead letters only, and its answer has no "pending".
    const dead = await post({ all: true }, "discard");
    expect(dead.body).toMatchObject({ discarded: ["g2"], backlog: { pending: 0, inflight: 1 } });
    expect(dead.body).not.toHaveProperty("pending");

    const audit = (await api("/api/audit?limit=10")).body.items.filter(
      (a: { action: string; target: string }) => a.action === "discard" && a.target === `signal:${signal}`,
    );
    expect(audit.map((a: { detail: unknown }) => a.detail)).toEqual([
      { all: true, count: 1, ids: ["g2"] },
      { pending: true, all: true, count: 1, ids: ["g3"] },
      { pending: true, all: false, count: 1, ids: ["g4"] },
      { dryRun: true, pending: true, all: true, count: 2 },
    ]);
    // Bad input is refused as a discard's is; an unknown signal is a 404.
    expect((await post({ all: true, ids: ["g1"] })).status).toBe(400);
    expect((await post({})).body.error.code).toBe("OKE1605");
    const unknown = await api("/api/signals/jobs.never/discard-pending", {
      method: "POST",
      body: JSON.stringify({ all: true }),
    });
    expect([unknown.status, unknown.body.error.code]).toEqual([404, "OKE1606"]);
  });

  it("a driver's 5xx meant for the log only (a path, SQL) is answered as OKE1600; the 501s about what the store can do are said as they are", async () => {
    const { api } = await start({
      store: (s) =>
        new Proxy(s, {
          get: (t, k) =>
            k === "pageRuns"
              ? () =>
                  Promise.reject(
                    new OkeError({
                      code: "OKE1399",
                      message: "driver failed at /srv/secret/store.db",
                      status: 500,
                    }),
                  )
              : Reflect.get(t, k),
        }),
    });
    const res = await api("/api/runs");
    expect(res.status).toBe(500);
    expect(res.body.error).toEqual({
      code: "OKE1600",
      message: "console: internal error (the app's log has the cause)",
    });
    expect(JSON.stringify(res.body)).not.toContain("/srv/secret");
  });

  it("HEAD on an API path answers as its GET would, without a body; an unknown one is still a 404", async () => {
    const { api, url } = await start();
    const head = (path: string, token: string | null = TOKEN) =>
      fetch(`${url}${path}`, {
        method: "HEAD",
        headers: token === null ? {} : { authorization: `Bearer ${token}` },
      });
    expect((await api("/api/overview")).status).toBe(200);
    const ok = await head("/api/overview");
    expect(ok.status).toBe(200);
    expect(ok.headers.get("content-type")).toBe("application/json; charset=utf-8");
    expect(await ok.text()).toBe("");
    expect((await head("/api/overview", null)).status).toBe(401);
    expect((await head("/api/nope")).status).toBe(404);
  });

  it("a run status that is an Object.prototype name is refused like any unknown status", async () => {
    const { api } = await start();
    for (const status of ["__proto__", "constructor", "toString"]) {
      const res = await api(`/api/runs?status=${status}`);
      expect([res.status, res.body.error?.code]).toEqual([400, "OKE1605"]);
    }
  });

  it("discard-pending answers 501 OKE1614 when the app's store has no discardPending (a third-party driver)", async () => {
    const { app, api, time } = await start({
      store: (s) => new Proxy(s, { get: (t, k) => (k === "discardPending" ? undefined : Reflect.get(t, k)) }),
    });
    await app.store.enqueue(
      [{ id: "p1", signal: "jobs.gone", key: null, payload: {}, parentRunId: null }],
      time.now(),
    );
    const res = await api("/api/signals/jobs.gone/discard-pending", {
      method: "POST",
      body: JSON.stringify({ all: true }),
    });
    expect([res.status, res.body.error.code]).toEqual([501, "OKE1614"]);
    expect(res.body.error.message).toContain("cannot discard pending messages: it has no discardPending");
    expect(await app.store.getMessage("p1")).toMatchObject({ status: "pending" });
  });

  it("lists this instance as alive with its version and what it runs; overview sums it up", async () => {
    const { api, app } = await start();
    // The first heartbeat is written as the app boots; wait for it to commit.
    await until(async () => (await api("/api/instances")).body.instances.length === 1, "heartbeat");
    const inst = await api("/api/instances");
    expect(inst.body.instances[0]).toMatchObject({
      flows: expect.arrayContaining(["jobs.work", "trip.parent", "trip.child"]),
      signals: expect.arrayContaining(["jobs.run", "clock:reports.nightly", "clock:reports.fixed"]),
      env: "test",
      version: expect.any(String),
      host: hostname(),
      pid: process.pid,
      role: "all",
    });
    const ov = await api("/api/overview");
    expect(ov.body).toMatchObject({
      env: "test",
      instances: 1,
      instanceRoles: { all: 1, web: 0, worker: 0 },
    });
    // The overview carries the newest audit entries; the audit log pages with a cursor like every list.
    for (let i = 0; i < 5; i++)
      await api("/api/signals/jobs.run/discard", {
        method: "POST",
        body: JSON.stringify({ all: true, dryRun: true }),
      });
    expect((await api("/api/overview")).body.audit).toHaveLength(5);
    const audit: number[] = [];
    let cursor: string | null = null;
    for (let guard = 0; guard < 10; guard++) {
      const page: Body = await api(`/api/audit?limit=2${cursor === null ? "" : `&cursor=${cursor}`}`);
      audit.push(...page.body.items.map((a: { id: number }) => a.id));
      cursor = page.body.next;
      if (cursor === null) break;
    }
    expect(audit).toHaveLength(5);
    expect([...audit].sort((a, b) => b - a)).toEqual(audit);
    const badCursor = await api("/api/audit?cursor=abc");
    expect([badCursor.status, badCursor.body.error?.code]).toEqual([400, "OKE1605"]);
    expect(ov.body.flows.map((f: { name: string }) => f.name)).toEqual(
      expect.arrayContaining(["jobs.work", "trip.parent"]),
    );
    await app.stop();
    cleanups.pop(); // stopped already
  });

  it("says each instance's role: a worker beside this one is a worker, an older instance's heartbeat without a role reads as all", async () => {
    let store!: Store;
    const { api, time } = await start({ store: (s) => (store = s) });
    const workerApp = createApp({ modules: [{ worker }], env: "test", clock: time, store, role: "worker" });
    cleanups.push(() => workerApp.stop({ timeoutMs: 2_000 }));
    await workerApp.start({ port: 0, host: "127.0.0.1" });
    // What an instance of an okengine before roles writes: no role field at all.
    await store.heartbeat(
      {
        id: "old-1",
        version: "1.0.0",
        okengineVersion: "0.9.0",
        host: "old-host",
        pid: 1,
        env: "test",
        startedAt: time.now(),
        flows: ["jobs.work"],
        signals: ["jobs.run"],
        console: null,
      },
      time.now(),
    );
    await until(async () => (await api("/api/instances")).body.instances.length === 3, "three heartbeats");
    const { instances, self } = (await api("/api/instances")).body;
    const roles = Object.fromEntries(
      instances.map((i: { id: string; role: string }) => [
        i.id === self ? "this" : i.id === "old-1" ? "old" : "worker",
        i.role,
      ]),
    );
    expect(roles).toEqual({ this: "all", worker: "worker", old: "all" });
    expect((await api("/api/overview")).body).toMatchObject({
      instances: 3,
      instanceRoles: { all: 2, web: 0, worker: 1 },
    });
  });

  it("lists schedules; pauses, resumes, edits, resets and triggers one, each audited; refuses bad edits and unknown names", async () => {
    nightlyFires = 0;
    const { app, api, url } = await start();
    const list = await api("/api/schedules");
    expect(list.status).toBe(200);
    const names = list.body.schedules.map((x: { name: string }) => x.name);
    expect(names).toEqual(["reports.fixed", "reports.nightly"]);
    const s = list.body.schedules.find((x: { name: string }) => x.name === "reports.nightly");
    expect(s).toMatchObject({
      flow: "reports.nightly",
      cron: "0 3 * * *",
      every: null,
      timezone: "UTC",
      paused: false,
      overridden: false,
      overridable: true,
      nextFireAt: Date.UTC(2023, 10, 15, 3),
    });
    // The clock's queue shows as a signal of its own, labelled with its schedule.
    expect((await api("/api/signals/clock:reports.nightly")).body).toMatchObject({
      schedule: "reports.nightly",
    });

    const post = (path: string, body?: unknown) =>
      api(path, { method: "POST", ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
    const paused = await post("/api/schedules/reports.nightly/pause");
    expect(paused.status).toBe(200);
    expect(paused.body).toMatchObject({ name: "reports.nightly", paused: true, nextFireAt: null });
    expect(
      (await api("/api/schedules")).body.schedules.find(
        (x: { name: string }) => x.name === "reports.nightly",
      ),
    ).toMatchObject({ paused: true });
    const resumed = await post("/api/schedules/reports.nightly/resume");
    expect(resumed.body).toMatchObject({ paused: false, nextFireAt: Date.UTC(2023, 10, 15, 3) });

    const edited = await post("/api/schedules/reports.nightly/edit", { every: "2h" });
    expect(edited.status).toBe(200);
    expect(edited.body).toMatchObject({
      cron: null,
      every: "2h",
      overridden: true,
      declared: { cron: "0 3 * * *", every: null, timezone: "UTC" },
    });
    const zoned = await post("/api/schedules/reports.nightly/edit", {
      cron: "30 6 * * *",
      timezone: "Europe/Paris",
    });
    expect(zoned.body).toMatchObject({ cron: "30 6 * * *", every: null, timezone: "Europe/Paris" });
    const badSpec = await post("/api/schedules/reports.nightly/edit", { cron: "not a cron" });
    expect(badSpec.status).toBe(400);
    expect(badSpec.body.error.code).toBe("OKE1701");
    // A mistyped field is refused, never dropped: the cron would apply in the zone stored before.
    const typo = await post("/api/schedules/reports.nightly/edit", {
      cron: "0 5 * * *",
      timeZone: "America/New_York",
    });
    expect(typo.status).toBe(400);
    expect(typo.body.error).toMatchObject({
      code: "OKE1701",
      message: expect.stringContaining('unknown field "timeZone"'),
    });
    expect(
      (await api("/api/schedules")).body.schedules.find(
        (x: { name: string }) => x.name === "reports.nightly",
      ),
    ).toMatchObject({
      cron: "30 6 * * *",
      timezone: "Europe/Paris",
    });
    const badType = await post("/api/schedules/reports.nightly/edit", { every: 5 });
    expect(badType.status).toBe(400);
    expect(badType.body.error.code).toBe("OKE1605");
    const locked = await post("/api/schedules/reports.fixed/edit", { every: "2d" });
    expect(locked.status).toBe(409);
    expect(locked.body.error.message).toBe('clock "reports.fixed" is not overridable');
    const reset = await post("/api/schedules/reports.nightly/reset");
    expect(reset.body).toMatchObject({ cron: "0 3 * * *", every: null, timezone: "UTC", overridden: false });

    const fired = await post("/api/schedules/reports.nightly/trigger");
    expect(fired.status).toBe(200);
    expect(fired.body).toMatchObject({
      clock: "reports.nightly",
      messageId: expect.stringMatching(/^clock:reports\.nightly:manual:/),
      scheduledAt: app.clock.now(),
    });
    await app.idle();
    expect(nightlyFires).toBe(1);

    const missing = await post("/api/schedules/nope/pause");
    expect(missing.status).toBe(404);
    expect(missing.body.error.message).toBe('cron "nope" not found');
    const unknownAction = await post("/api/schedules/reports.nightly/explode");
    expect(unknownAction.status).toBe(404);
    expect(unknownAction.body.error.code).toBe("OKE1606");
    const anonymous = await api("/api/schedules/reports.nightly/pause", { method: "POST", token: null });
    expect(anonymous.status).toBe(401);
    const unmarked = await fetch(`${url}/api/schedules/reports.nightly/pause`, {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(unmarked.status).toBe(403);
    expect(
      (await api("/api/schedules")).body.schedules.find(
        (x: { name: string }) => x.name === "reports.nightly",
      ),
    ).toMatchObject({ paused: false });

    const audit = (await api("/api/audit")).body.items.filter((a: { target: string }) =>
      a.target.startsWith("schedule:"),
    );
    expect(audit.map((a: { action: string }) => a.action)).toEqual([
      "trigger",
      "reset",
      "edit",
      "edit",
      "resume",
      "pause",
    ]);
    expect(audit[0]).toMatchObject({ actor: "alice", target: "schedule:reports.nightly" });
    expect(audit.find((a: { action: string }) => a.action === "edit").detail).toEqual({
      cron: "30 6 * * *",
      timezone: "Europe/Paris",
    });
  });

  it("refuses requests without a valid token, cross-site mutations, and too many failed sign-ins", async () => {
    const { api, url } = await start();
    const none = await api("/api/signals", { token: null });
    expect(none.status).toBe(401);
    expect(none.body.error.code).toBe("OKE1601");
    const wrong = await api("/api/signals", { token: "not-the-token-at-all" });
    expect(wrong.status).toBe(401);
    expect(wrong.body.error.code).toBe("OKE1602");
    const noHeader = await fetch(`${url}/api/signals/jobs.run/replay`, {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify({ all: true }),
    });
    expect(noHeader.status).toBe(403);
    const foreign = await api("/api/signals/jobs.run/replay", {
      method: "POST",
      headers: { origin: "https://evil.example" },
      body: JSON.stringify({ all: true }),
    });
    expect(foreign.status).toBe(403);
    expect(foreign.body.error.code).toBe("OKE1603");
    const bad = await api("/api/signals/jobs.run/replay", {
      method: "POST",
      body: JSON.stringify({ ids: [] }),
    });
    expect(bad.status).toBe(400);
    expect((await api("/api/signals/nope/dead")).status).toBe(404);
    expect((await api("/api/runs?status=zzz")).status).toBe(400);

    // Browser sign-in: a session cookie named after the Console's port, HttpOnly and SameSite=Strict.
    const login = await fetch(`${url}/api/login`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-oke-console": "1" },
      body: JSON.stringify({ token: TOKEN }),
    });
    expect(login.status).toBe(200);
    const cookie = login.headers.get("set-cookie")!;
    expect(cookie).toMatch(/HttpOnly; SameSite=Strict/);
    expect(cookie.startsWith(`oke_console_${new URL(url).port}=`)).toBe(true);
    expect(cookie).not.toMatch(/Secure/);
    const who = await fetch(`${url}/api/whoami`, { headers: { cookie: cookie.split(";")[0]! } });
    expect(await who.json()).toMatchObject({ label: "alice", open: false });
    // Behind an https proxy (a chain of two names the client's scheme first): the cookie is Secure.
    const proxied = await fetch(`${url}/api/login`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "x-oke-console": "1",
        "x-forwarded-proto": "https, http",
      },
      body: JSON.stringify({ token: TOKEN }),
    });
    expect(proxied.headers.get("set-cookie")).toMatch(/; Secure/);

    let status = 0;
    for (let i = 0; i < 12 && status !== 429; i++)
      status = (await api("/api/signals", { token: `wrong-token-${i}` })).status;
    expect(status).toBe(429);
    // Even the right token waits out the window once the address is over its budget.
    expect((await api("/api/signals")).status).toBe(429);
  });

  it("runs open on loopback without tokens outside production, and still refuses foreign Host names", async () => {
    const { api, url } = await start({ tokens: null });
    expect((await api("/api/signals", { token: null })).status).toBe(200);
    const page = await fetch(url + "/");
    expect(page.status).toBe(200);
    expect(page.headers.get("content-security-policy")).toContain("default-src 'none'");
    const { request } = await import("node:http");
    const status = await new Promise<number>((resolve, reject) => {
      const r = request(`${url}/api/signals`, { headers: { host: "evil.example:6533" } }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      r.on("error", reject);
      r.end();
    });
    expect(status).toBe(403);
  });
});
