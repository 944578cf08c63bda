// createIdempotency's completion off the answer's path: a failed completion is logged, a 5xx waits for its release, drain() for all.
import { pino } from "pino";
import { describe, expect, it, vi } from "vitest";
import { createMemoryStore } from "../store/memory/memory-store.ts";
import type { Store } from "../store/types.ts";
import type { Reply } from "./envelope.ts";
import { createIdempotency, IDEMPOTENCY_LOCK_MS } from "./idempotency.ts";

const recording = () => {
  const records: Array<Record<string, unknown>> = [];
  const logger = pino(
    { level: "debug" },
    { write: (l: string) => void records.push(JSON.parse(l) as Record<string, unknown>) },
  );
  return { logger, records };
};

/** A memory store whose completion and release go through `hook` first. */
const hooked = (hook: { complete?: () => Promise<void>; release?: () => Promise<void> }): Store => {
  const real = createMemoryStore();
  return Object.assign(Object.create(real) as Store, {
    completeIdempotencyKey: async (req: Parameters<Store["completeIdempotencyKey"]>[0]) => {
      await hook.complete?.();
      return real.completeIdempotencyKey(req);
    },
    releaseIdempotencyKey: async (req: Parameters<Store["releaseIdempotencyKey"]>[0]) => {
      await hook.release?.();
      return real.releaseIdempotencyKey(req);
    },
    claimIdempotencyKey: real.claimIdempotencyKey.bind(real),
    getIdempotencyKey: real.getIdempotencyKey.bind(real),
    pruneIdempotencyKeys: real.pruneIdempotencyKeys.bind(real),
    renewIdempotencyKey: real.renewIdempotencyKey.bind(real),
    getRun: real.getRun.bind(real),
  });
};

const request = (idem: ReturnType<typeof createIdempotency>, key: string, answer: Reply) =>
  new Promise<Reply>((resolve) =>
    idem.handle(
      key,
      "fp",
      (_runId, finished) => finished(answer),
      resolve,
      () => ({ status: 500, body: undefined }),
    ),
  );

describe("createIdempotency", () => {
  it("abandon() (the shutdown deadline) lapses a running key's lock at once, and the flow's late 5xx neither frees the key nor is stored: the retry takes it over with the same run id", async () => {
    const { logger } = recording();
    const store = createMemoryStore();
    const now = 1_000;
    const idem = createIdempotency({ store, now: () => now, windowMs: 60_000, logger });
    const runIds: string[] = [];
    let finishFirst: ((reply: Reply) => void) | undefined;
    const late: Reply[] = [];
    const started = new Promise<void>((ready) =>
      idem.handle(
        "k-cut",
        "fp",
        (runId, finished) => {
          runIds.push(runId);
          finishFirst = finished;
          ready();
        },
        (reply) => late.push(reply),
        () => ({ status: 500, body: undefined }),
      ),
    );
    await started;
    idem.abandon();
    await idem.stop();
    const lapsed = await store.getIdempotencyKey("k-cut");
    expect(lapsed).toMatchObject({ status: "running", runId: runIds[0] });
    expect(lapsed!.lockedUntil).toBeLessThanOrEqual(now);
    // The flow fails late (its store closing under it, say): not a release, not a stored answer.
    finishFirst!({ status: 500, body: '{"ok":false}' });
    await idem.stop();
    expect(await store.getIdempotencyKey("k-cut")).toMatchObject({ status: "running", runId: runIds[0] });
    expect(late).toHaveLength(1);
    // A retry (another instance's handler) takes the record over at once and runs under the same run id.
    const other = createIdempotency({ store, now: () => now + 1, windowMs: 60_000, logger });
    const retry = await new Promise<Reply>((resolve) =>
      other.handle(
        "k-cut",
        "fp",
        (runId, finished) => {
          runIds.push(runId);
          finished({ status: 200, body: '{"ok":true}' });
        },
        resolve,
        () => ({ status: 500, body: undefined }),
      ),
    );
    expect(retry.status).toBe(200);
    expect(runIds).toEqual([runIds[0], runIds[0]]);
  });

  it("a passing refusal (the run leased by another holder) is not stored and keeps the key's run id: the retry takes it over and continues that run", async () => {
    const { logger } = recording();
    const store = createMemoryStore();
    let now = 1_000;
    const idem = createIdempotency({ store, now: () => now, windowMs: 60_000, logger });
    const runIds: string[] = [];
    const attempt = (answer: Reply) =>
      new Promise<Reply>((resolve) =>
        idem.handle(
          "k-busy",
          "fp",
          (runId, finished) => {
            runIds.push(runId);
            finished(answer);
          },
          resolve,
          () => ({ status: 500, body: undefined }),
        ),
      );
    expect((await attempt({ status: 409, body: '{"ok":false}', passing: true })).status).toBe(409);
    await idem.drain();
    const kept = await store.getIdempotencyKey("k-busy");
    expect(kept).toMatchObject({ status: "running", response: null, runId: runIds[0] });
    expect(kept!.lockedUntil).toBeLessThanOrEqual(now);
    now += 1;
    // The retry runs under the same run id (a durable run continues instead of a second one starting).
    expect((await attempt({ status: 200, body: '{"ok":true}' })).status).toBe(200);
    await idem.drain();
    expect(runIds).toHaveLength(2);
    expect(runIds[1]).toBe(runIds[0]);
    expect((await store.getIdempotencyKey("k-busy"))?.response).toEqual({ status: 200, body: '{"ok":true}' });
  });

  it("a lock renewal sent while the request ran lands before the request's lapse, so a retry is not locked out for the lock's length", async () => {
    // Only the renewal timer is faked: it fires on demand, everything else runs for real.
    vi.useFakeTimers({ toFake: ["setInterval", "clearInterval"] });
    try {
      const { logger } = recording();
      const real = createMemoryStore();
      let letRenewalLand: () => void = () => undefined;
      const renewalHeld = new Promise<void>((r) => (letRenewalLand = r));
      const store = Object.assign(Object.create(real) as Store, {
        // A renewal (lockMs > 0) is slow to land, as on a busy pool connection; the lapse is not.
        renewIdempotencyKey: async (req: Parameters<Store["renewIdempotencyKey"]>[0]) => {
          if (req.lockMs > 0) await renewalHeld;
          return real.renewIdempotencyKey(req);
        },
        claimIdempotencyKey: real.claimIdempotencyKey.bind(real),
        completeIdempotencyKey: real.completeIdempotencyKey.bind(real),
        releaseIdempotencyKey: real.releaseIdempotencyKey.bind(real),
        getIdempotencyKey: real.getIdempotencyKey.bind(real),
        pruneIdempotencyKeys: real.pruneIdempotencyKeys.bind(real),
        getRun: real.getRun.bind(real),
      });
      let now = 1_000;
      const idem = createIdempotency({ store, now: () => now, windowMs: 60_000, logger });
      let finish: ((reply: Reply) => void) | undefined;
      const answered = new Promise<Reply>((resolve) =>
        idem.handle(
          "k-renewed",
          "fp",
          (_runId, finished) => (finish = finished),
          resolve,
          () => ({ status: 500, body: undefined }),
        ),
      );
      for (let turn = 0; turn < 100 && finish === undefined; turn++)
        await new Promise((r) => setImmediate(r));
      // The request runs; its renewal goes out (held on its way), then the request ends in a passing refusal.
      vi.advanceTimersByTime(IDEMPOTENCY_LOCK_MS / 3);
      now += 5;
      finish!({ status: 409, body: '{"ok":false}', passing: true });
      for (let turn = 0; turn < 10; turn++) await new Promise((r) => setImmediate(r));
      letRenewalLand();
      expect((await answered).status).toBe(409);
      await idem.drain();
      // Lapsed: the retry takes the key over at once (before: locked until 31 000, 409 for 30 s).
      expect((await real.getIdempotencyKey("k-renewed"))?.lockedUntil).toBe(now);
    } finally {
      vi.useRealTimers();
    }
  });

  it("a completion that fails after the answer went out is logged with its key; a retry then finds the key running", async () => {
    const { logger, records } = recording();
    const store = hooked({ complete: () => Promise.reject(new Error("connection lost")) });
    const idem = createIdempotency({ store, now: () => 1_000, windowMs: 60_000, logger });
    expect(await request(idem, "k1", { status: 200, body: '{"ok":true}' })).toEqual({
      status: 200,
      body: '{"ok":true}',
    });
    await idem.drain();
    expect(records).toContainEqual(
      expect.objectContaining({
        level: 50,
        key: "k1",
        msg: "idempotency: could not store the response of a keyed request",
      }),
    );
    expect((await request(idem, "k1", { status: 200, body: "{}" })).status).toBe(409);
  });

  it("a 5xx is answered only once its key is released, so a retry on receipt runs again", async () => {
    const { logger } = recording();
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    const store = hooked({ release: () => released });
    const idem = createIdempotency({ store, now: () => 1_000, windowMs: 60_000, logger });
    let answered = false;
    const first = request(idem, "k2", { status: 503, body: "{}" }).then((r) => {
      answered = true;
      return r;
    });
    await new Promise((r) => setImmediate(r));
    expect(answered).toBe(false);
    release();
    expect((await first).status).toBe(503);
    expect(await request(idem, "k2", { status: 201, body: '{"n":2}' })).toEqual({
      status: 201,
      body: '{"n":2}',
    });
  });

  it("drain() resolves once the answers already sent are stored", async () => {
    const { logger } = recording();
    let open!: () => void;
    const held = new Promise<void>((r) => (open = r));
    const store = hooked({ complete: () => held });
    const idem = createIdempotency({ store, now: () => 1_000, windowMs: 60_000, logger });
    expect((await request(idem, "k3", { status: 200, body: "{}" })).status).toBe(200);
    let drained = false;
    const draining = idem.drain().then(() => (drained = true));
    await new Promise((r) => setImmediate(r));
    expect(drained).toBe(false);
    open();
    await draining;
    expect((await store.getIdempotencyKey("k3"))?.status).toBe("done");
  });

  it("after stop() no lock renewal goes out for a request still running, and stop() waits for the renewal already out", async () => {
    // Only the renewal timer is faked: it fires on demand, everything else runs for real.
    vi.useFakeTimers({ toFake: ["setInterval", "clearInterval"] });
    try {
      const { logger } = recording();
      const real = createMemoryStore();
      const renewals: number[] = [];
      let letRenewalLand: () => void = () => undefined;
      const renewalHeld = new Promise<void>((r) => (letRenewalLand = r));
      const store = Object.assign(Object.create(real) as Store, {
        renewIdempotencyKey: async (req: Parameters<Store["renewIdempotencyKey"]>[0]) => {
          renewals.push(req.now);
          if (renewals.length === 1) await renewalHeld;
          return real.renewIdempotencyKey(req);
        },
        claimIdempotencyKey: real.claimIdempotencyKey.bind(real),
        completeIdempotencyKey: real.completeIdempotencyKey.bind(real),
        releaseIdempotencyKey: real.releaseIdempotencyKey.bind(real),
        getIdempotencyKey: real.getIdempotencyKey.bind(real),
        pruneIdempotencyKeys: real.pruneIdempotencyKeys.bind(real),
        getRun: real.getRun.bind(real),
      });
      const idem = createIdempotency({ store, now: () => 1_000, windowMs: 60_000, logger });
      const started: string[] = [];
      // Requests whose flows hang past the shutdown deadline: they never finish.
      const hang = (key: string) =>
        idem.handle(
          key,
          "fp",
          () => void started.push(key),
          () => undefined,
          () => ({ status: 500, body: undefined }),
        );
      hang("k-hung");
      for (let turn = 0; turn < 100 && started.length === 0; turn++)
        await new Promise((r) => setImmediate(r));
      vi.advanceTimersByTime(IDEMPOTENCY_LOCK_MS / 3);
      expect(renewals).toHaveLength(1);
      let stopped = false;
      const stopping = idem.stop().then(() => (stopped = true));
      for (let turn = 0; turn < 10; turn++) await new Promise((r) => setImmediate(r));
      const stoppedBeforeTheRenewalLanded = stopped;
      letRenewalLand();
      await stopping;
      // A request that claimed its key just before the stop, and the renewal timer's later turns.
      hang("k-late");
      for (let turn = 0; turn < 100 && started.length < 2; turn++) await new Promise((r) => setImmediate(r));
      vi.advanceTimersByTime(3 * IDEMPOTENCY_LOCK_MS);
      for (let turn = 0; turn < 10; turn++) await new Promise((r) => setImmediate(r));

      expect(renewals).toHaveLength(1);
      expect(stoppedBeforeTheRenewalLanded).toBe(false);
    } finally {
      vi.useRealTimers();
    }
  });
});
