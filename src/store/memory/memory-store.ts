/** The memory driver: a MemoryEngine wrapped as an async Store. */
import { storeErrors } from "../index.ts";
import { createStoreListeners, type ListenerFailureLog } from "../store-listeners.ts";
import type { NewMessage, Store, StoreEvent } from "../types.ts";
import { MemoryEngine, type EngineOp } from "./memory-engine.ts";
import { createMemorySubscriptions } from "./memory-fanout.ts";
import type { TapeRef } from "../fanout-types.ts";

/**
 * What createEngineStore drives: the MemoryEngine's synchronous methods. The
 * file driver's SqliteEngine has the same surface over SQLite tables.
 */
export type StoreEngine = Omit<MemoryEngine, "snapshot" | "putTapeEntries">;

export interface EngineStoreOptions {
  driver: Store["driver"];
  engine: StoreEngine;
  /**
   * Called after an op changed the engine's state and before the call
   * resolves; a rejection rejects the call. The file driver waits here for
   * the commit of the transaction the op wrote in. Calls arrive in the order ops were applied; serialize `op`
   * before the first await — it holds the caller's objects.
   */
  persist?: (op: EngineOp) => void | Promise<void>;
  open?: () => Promise<void>;
  close?: () => Promise<void>;
  /** Where a store listener that throws is reported. */
  logger?: ListenerFailureLog;
}

/**
 * Wraps a synchronous MemoryEngine as an async Store: each call applies one
 * op, lets `persist` record it when state changed, then announces it to
 * subscribers. Ops that changed nothing (an empty claim, a fenced settle) are
 * not persisted, so an idle poll loop writes no log records.
 */
const HEALTHY = Object.freeze({ ok: true as const });

export function createEngineStore(opts: EngineStoreOptions): Store {
  const { engine, driver } = opts;
  const listeners = createStoreListeners(opts.logger);
  const commit = async (op: EngineOp | null, events: readonly StoreEvent[] = []): Promise<void> => {
    if (op !== null && opts.persist !== undefined) await opts.persist(op);
    for (const event of events) listeners.emit(event);
  };
  const enqueued = (messages: readonly NewMessage[]): StoreEvent[] =>
    [...new Set(messages.map((m) => m.signal))].map((signal) => ({ kind: "enqueued", signal }));
  const wake: StoreEvent[] = [{ kind: "wake" }];
  const tapeListeners = new Set<(tape: TapeRef | "all") => void>();
  /** Told after the append committed (the file driver: after its fsync). */
  const tellTapes = (refs: readonly TapeRef[]): void => {
    for (const ref of refs)
      for (const l of [...tapeListeners]) {
        try {
          l(ref);
        } catch (err) {
          // A broken listener must not fail a committed append; surface it instead.
          queueMicrotask(() => {
            throw err;
          });
        }
      }
  };

  return {
    driver,
    open: async () => {
      await opts.open?.();
    },
    close: async () => {
      await opts.close?.();
    },
    subscribe: listeners.subscribe,
    ...createMemorySubscriptions(),
    async appendTape(entries, now) {
      const out = engine.appendTape(entries, now);
      if (out.length === 0) return out;
      await commit({ op: "appendTape", entries: out });
      const touched = new Map(out.map((e) => [JSON.stringify([e.signal, e.key]), e]));
      tellTapes([...touched.values()].map((e) => ({ signal: e.signal, key: e.key })));
      return out;
    },
    async readTape(req) {
      return engine.readTape(req);
    },
    async tapeHead(signal, key) {
      return engine.tapeHead(signal, key);
    },
    async tapeGap(req) {
      return engine.tapeGap(req);
    },
    async lastTapePosition() {
      return engine.lastTapePosition();
    },
    async pruneTape(signal, before, limit) {
      const cuts = engine.prunableTape(signal, before, limit);
      const n = engine.cutTape(signal, cuts);
      if (n > 0) await commit({ op: "pruneTape", signal, cuts });
      return n;
    },
    subscribeTapes(listener) {
      tapeListeners.add(listener);
      return () => {
        tapeListeners.delete(listener);
      };
    },
    // Memory cannot fail to commit; the file driver reports its disk itself.
    health: () => HEALTHY,

    async enqueue(messages, now, options) {
      if (options?.tx !== undefined) throw storeErrors.txUnsupported(driver);
      if (messages.length === 0) return;
      engine.enqueue(messages, now);
      await commit({ op: "enqueue", messages, now }, enqueued(messages));
    },
    async claim(req) {
      const out = engine.claim(req);
      await commit(out.length > 0 ? { op: "claim", req } : null);
      return out;
    },
    async settle(settlements, now) {
      const { applied, signals } = engine.settle(settlements, now);
      await commit(
        applied.length > 0 ? { op: "settle", settlements, now } : null,
        signals.map((signal) => ({ kind: "settled", signal })),
      );
      return { applied };
    },
    async releaseClaimed(claims, now) {
      const { applied, signals } = engine.releaseClaimed(claims, now);
      await commit(
        applied.length > 0 ? { op: "releaseClaimed", claims, now } : null,
        signals.map((signal) => ({ kind: "settled", signal })),
      );
      return applied;
    },
    async leaveClaimsToLease(claims, now) {
      const left = engine.leaveClaimsToLease(claims, now);
      if (left.length > 0) await commit({ op: "leaveClaimsToLease", claims, now });
      return left;
    },
    async deadLetters(signal, limit) {
      return engine.deadLetters(signal, limit);
    },
    async getMessage(id) {
      return engine.getMessage(id);
    },
    async replay(signal, ids, now) {
      const out = engine.replay(signal, ids, now);
      if (out.length > 0)
        await commit({ op: "replay", signal, ids: out, now }, [{ kind: "enqueued", signal }]);
      return out;
    },
    async resettleDelivered(req, now) {
      const { applied, signals } = engine.resettleDelivered(req, now);
      // Logged even when a retry found it done: applying it again changes nothing (resettle-rules).
      await commit(
        applied ? { op: "resettleDelivered", req, now } : null,
        signals.map((signal) => ({ kind: "enqueued", signal })),
      );
      return applied;
    },
    async discard(signal, ids) {
      const out = engine.discard(signal, ids);
      if (out.length > 0) await commit({ op: "discard", signal, ids: out });
      return out;
    },
    async discardPending(signal, ids) {
      const out = engine.discardPending(signal, ids);
      if (out.length > 0) await commit({ op: "discardPending", signal, ids: out });
      return out;
    },
    async stats(signal, now) {
      return engine.stats(signal, now);
    },
    async nextLeaseExpiry(signal) {
      return engine.nextLeaseExpiry(signal);
    },
    async pruneDelivered(before) {
      const n = engine.pruneDelivered(before);
      if (n > 0) await commit({ op: "pruneDelivered", before });
      return n;
    },

    async startRun(req) {
      const out = engine.startRun(req);
      await commit({ op: "startRun", req });
      return out;
    },
    async acquireRun(req) {
      const out = engine.acquireRun(req);
      await commit({ op: "acquireRun", req });
      return out;
    },
    async renewLease(req) {
      engine.renewLease(req);
      await commit({ op: "renewLease", req });
    },
    async append(req) {
      engine.append(req);
      await commit({ op: "append", req }, enqueued(req.emits ?? []));
    },
    async park(req) {
      engine.park(req);
      await commit({ op: "park", req }, wake);
    },
    async finish(req) {
      engine.finish(req);
      await commit({ op: "finish", req });
    },
    async beginCompensation(req) {
      engine.beginCompensation(req);
      await commit({ op: "beginCompensation", req });
    },
    async releaseRun(req) {
      if (engine.releaseRun(req))
        await commit({ op: "releaseRun", req }, req.retryAt === undefined ? [] : [{ kind: "wake" }]);
    },
    async leaveToLease(req) {
      const left = engine.leaveToLease(req);
      if (left.length > 0) await commit({ op: "leaveToLease", req });
      return left;
    },
    async claimDueRuns(req) {
      const out = engine.claimDueRuns(req);
      await commit(out.length > 0 ? { op: "claimDueRuns", req } : null);
      return out;
    },
    async listOrphans(now, limit, filter) {
      return engine.listOrphans(now, limit, filter);
    },
    async nextWakeAt(filter) {
      return engine.nextWakeAt(filter);
    },
    async wakeEarly(runId, now) {
      const woke = engine.wakeEarly(runId, now);
      if (woke) await commit({ op: "wakeEarly", runId, now }, wake);
      return woke;
    },
    async terminateRun(req) {
      const out = engine.terminateRun(req);
      // Nothing is announced: a terminated run is due to no one.
      if (out.outcome === "terminated") await commit({ op: "terminateRun", req });
      return out;
    },
    async getRun(runId) {
      return engine.getRun(runId);
    },
    async getJournal(runId) {
      return engine.getJournal(runId);
    },
    async getJournalEnds(runId, head, tail) {
      return engine.getJournalEnds(runId, head, tail);
    },
    async listRuns(filter) {
      return engine.listRuns(filter);
    },

    async pageMessages(req) {
      return engine.pageMessages(req);
    },
    async pageRuns(req) {
      return engine.pageRuns(req);
    },
    async runCounts() {
      return engine.runCounts();
    },
    async queueBacklog() {
      return engine.queueBacklog();
    },
    async throughput(from, bucketMs, now) {
      return engine.throughput(from, bucketMs, now);
    },
    async heartbeat(info, now) {
      engine.heartbeat(info, now);
      await commit({ op: "heartbeat", info, now });
    },
    async listInstances(since) {
      return engine.listInstances(since);
    },
    async removeInstance(id) {
      if (engine.removeInstance(id)) await commit({ op: "removeInstance", id });
    },
    async recordAudit(entry) {
      const rec = engine.recordAudit(entry);
      await commit({ op: "audit", entry });
      return rec;
    },
    async pageAudit(req) {
      return engine.pageAudit(req);
    },

    async reconcileSchedules(declared, now, options) {
      const out = engine.reconcileSchedules(declared, now, options);
      await commit(
        { op: "reconcileSchedules", declared: [...declared], now, ...(options ? { options } : {}) },
        wake,
      );
      return out;
    },
    async listSchedules() {
      return engine.listSchedules();
    },
    async getSchedule(name) {
      return engine.getSchedule(name);
    },
    async setSchedulePaused(name, paused, now) {
      const out = engine.setSchedulePaused(name, paused, now);
      if (out !== undefined) await commit({ op: "setSchedulePaused", name, paused, now }, wake);
      return out;
    },
    async overrideSchedule(name, spec, now) {
      const out = engine.overrideSchedule(name, spec, now);
      if (out !== undefined) await commit({ op: "overrideSchedule", name, spec, now }, wake);
      return out;
    },
    async fire(req) {
      const fired = engine.fire(req);
      if (fired) await commit({ op: "fire", req }, enqueued([req.message]));
      return fired;
    },
    async fireBatch(reqs) {
      const fired = reqs.map((r) => engine.fire(r));
      const done = reqs.filter((_, i) => fired[i]);
      if (done.length > 0)
        await commit({ op: "fireBatch", reqs: done }, enqueued(done.map((r) => r.message)));
      return fired;
    },
    async recordScheduleError(name, error, now) {
      const had = (engine.getSchedule(name)?.lastError ?? null) !== null;
      // Whether the clock has an error at all is what other instances act on (a success clears it
      // only when they know there is one): a change of that is a wake, a newer error is not.
      if (engine.recordScheduleError(name, error, now))
        await commit({ op: "recordScheduleError", name, error, now }, had !== (error !== null) ? wake : []);
    },
    async listFires(name, limit) {
      return engine.listFires(name, limit);
    },
    async pruneRuns(before, limit) {
      const ids = engine.prunableRuns(before, limit);
      const n = engine.removeRuns(ids);
      if (n > 0) await commit({ op: "pruneRuns", ids });
      return n;
    },
    async pruneFires(before) {
      const n = engine.pruneFires(before);
      if (n > 0) await commit({ op: "pruneFires", before });
      return n;
    },

    async claimIdempotencyKey(req) {
      const { claim, changed } = engine.claimIdempotency(req);
      if (changed) await commit({ op: "claimIdempotency", req });
      return claim;
    },
    async renewIdempotencyKey(req) {
      const ok = engine.renewIdempotency(req);
      if (ok) await commit({ op: "renewIdempotency", req });
      return ok;
    },
    async completeIdempotencyKey(req) {
      const outcome = engine.completeIdempotency(req);
      if (outcome !== "superseded") await commit({ op: "completeIdempotency", req });
      return outcome;
    },
    async releaseIdempotencyKey(req) {
      if (engine.releaseIdempotency(req)) await commit({ op: "releaseIdempotency", req });
    },
    async getIdempotencyKey(key) {
      return engine.getIdempotency(key);
    },
    async pruneIdempotencyKeys(before) {
      const n = engine.pruneIdempotency(before);
      if (n > 0) await commit({ op: "pruneIdempotency", before });
      return n;
    },
  };
}

/** The process-local store (driver "memory"): the reference semantics, lost on exit. */
export function createMemoryStore(
  engine: MemoryEngine = new MemoryEngine(),
  options: { logger?: ListenerFailureLog } = {},
): Store {
  return createEngineStore({
    driver: "memory",
    engine,
    ...(options.logger ? { logger: options.logger } : {}),
  });
}
