/** The file driver: the memory engine, persisted as a snapshot plus an append-only log. */
import { resolve } from "node:path";
import type { Logger } from "../../log/logger.ts";
import {
  MemoryEngine,
  applyOp,
  createEngineStore,
  type EngineOp,
  type EngineSnapshot,
} from "../memory/index.ts";
import { createHealthMonitor } from "../store-health.ts";
import { createStoreListeners } from "../store-listeners.ts";
import type { FanoutStore, TapeRef } from "../fanout-types.ts";
import { createMemorySubscriptions } from "../memory/memory-fanout.ts";
import type { Store } from "../types.ts";
import { CommitLog, type CommitLogCounters } from "./commit-log.ts";
import { fileStoreErrors } from "./file-errors.ts";
import { acquireLock, type HeldLock } from "./file-lock.ts";
import { probeWritable } from "./durable-fs.ts";
import { recover } from "./recovery.ts";

export interface FileStoreOptions {
  /**
   * Directory of the store, created if missing; by convention `.oke` beside
   * the app. It holds `journal.json` (the compacted state), `journal.log` (the
   * operations since) and `lock` (the pid of the process that has it open).
   */
  dir: string;
  /**
   * Once `journal.log` grows past this many bytes (see also `compactRatio`)
   * it is folded into `journal.json` and restarted, bounding both disk use
   * and recovery time. Default 8 MiB.
   */
  compactBytes?: number;
  /**
   * Compaction also waits until the log is at least this fraction of
   * `journal.json`'s size, so a large state is not rewritten every
   * `compactBytes` of log: the rewrite costs at most ~1/ratio times the bytes
   * logged. Default 1; 0 compacts on `compactBytes` alone.
   */
  compactRatio?: number;
  /** Fold the log into `journal.json` on close(), so the next open reads one file. Default true. */
  compactOnClose?: boolean;
  /** Told about recovery (a torn log tail cut off) and about a dead process's lock taken over. */
  logger?: Pick<Logger, "info" | "warn">;
}

export interface FileStoreDiagnostics extends CommitLogCounters {
  /** Records replayed from the log by the last open(). */
  replayed: number;
  /** Bytes of torn or damaged log tail the last open() cut off. */
  droppedBytes: number;
}

/** The file driver: the Store contract plus write counters for tests and benchmarks. */
export interface FileStore extends Store {
  readonly driver: "file";
  /** Absolute path of the store directory. */
  readonly dir: string;
  diagnostics(): FileStoreDiagnostics;
}

export const DEFAULT_COMPACT_BYTES = 8 * 1024 * 1024;

type Methods = Omit<Store, "driver" | "open" | "close" | "subscribe" | "health" | keyof FanoutStore>;

interface Session {
  inner: Store;
  log: CommitLog;
  lock: HeldLock;
  replayed: number;
  droppedBytes: number;
}

/**
 * Durable storage for one machine: the memory engine, with every state change
 * appended to a checksummed log and fsync'd before its call resolves (calls
 * arriving during a flush share the next one). Reads also wait for the flush
 * of what they saw, so no caller ever observes state a crash could undo.
 */
export function createFileStore(options: FileStoreOptions): FileStore {
  const dir = resolve(options.dir);
  const compactBytes = options.compactBytes ?? DEFAULT_COMPACT_BYTES;
  const logger = options.logger;
  const listeners = createStoreListeners(logger);
  const tapeListeners = new Set<(tape: TapeRef | "all") => void>();
  const tellTapes = (tape: TapeRef | "all"): void => {
    for (const l of [...tapeListeners]) l(tape);
  };
  let session: Session | undefined;
  let opening: Promise<void> | undefined;
  let closing: Promise<void> | undefined;

  const bind = (s: Pick<Session, "log">, engine: MemoryEngine): Store => {
    const inner = createEngineStore({
      driver: "file",
      engine,
      ...(logger ? { logger } : {}),
      persist: (op: EngineOp) => {
        s.log.append(op);
        return s.log.barrier();
      },
    });
    inner.subscribe(listeners.emit);
    inner.subscribeTapes(tellTapes);
    return inner;
  };

  /** Rebuilds the state from disk (snapshot + log) into a fresh session holding `lock`. */
  const openSession = async (lock: HeldLock): Promise<Session> => {
    const rec = await recover(dir);
    let engine = rec.state === undefined ? new MemoryEngine() : restore(dir, rec.state);
    rec.records.forEach((record, i) => {
      try {
        if (typeof (record as { op?: unknown } | null)?.op !== "string") throw new Error("not an engine op");
        applyOp(engine, record as EngineOp);
      } catch (e) {
        throw fileStoreErrors.corrupt(dir, `record ${i + 1} of journal.log does not replay`, e);
      }
    });
    if (rec.dropped) {
      logger?.warn(
        { dir, ...rec.dropped },
        `file store: cut ${rec.dropped.bytes} bytes of ${rec.dropped.reason} log tail`,
      );
    }
    const s: Partial<Session> & Pick<Session, "lock"> = {
      lock,
      replayed: rec.records.length,
      droppedBytes: rec.dropped?.bytes ?? 0,
    };
    s.log = await CommitLog.open({
      dir,
      generation: rec.generation,
      bytes: rec.logBytes,
      compactBytes,
      compactRatio: options.compactRatio ?? 1,
      snapshotBytes: rec.snapshotBytes,
      wrapFailure: (cause) => {
        const err = fileStoreErrors.failed(dir, cause);
        monitor.failed(err);
        return err;
      },
      snapshotJson: () => {
        const json = JSON.stringify(engine.snapshot());
        // Continue on the state recovery would rebuild from this snapshot, not on the
        // live one: restore may order ties (retries, equal deadlines) differently, and
        // the records logged after it must replay exactly as they ran.
        engine = restore(dir, JSON.parse(json));
        if (s.inner) s.inner = bind(s as Session, engine);
        return json;
      },
    });
    s.inner = bind(s as Session, engine);
    return s as Session;
  };

  const doOpen = async (): Promise<void> => {
    const lock = await acquireLock(dir, (pid) =>
      logger?.warn({ dir, pid }, `file store: took over the lock of process ${pid ?? "?"}, which is gone`),
    );
    try {
      session = await openSession(lock);
    } catch (e) {
      await lock.release();
      throw e;
    }
  };

  /**
   * After a failed write (a full disk, an I/O error) the session refuses every
   * call. Once a probe write succeeds, the log is cut back to its last durable
   * byte and the state rebuilt from disk, dropping exactly the operations whose
   * callers were told they failed, and the store serves again by itself.
   */
  const recoverSession = async (): Promise<void> => {
    const failed = session;
    if (failed === undefined || closing !== undefined || failed.log.health().ok) return;
    await probeWritable(dir);
    await failed.log.abandon();
    const fresh = await openSession(failed.lock);
    if (session !== failed || closing !== undefined) {
      await fresh.log.close(false);
      return;
    }
    session = fresh;
    // Work the failed calls left undone is claimable again; tape readers re-read from what is on disk.
    listeners.emit({ kind: "wake" });
    tellTapes("all");
  };

  const monitor = createHealthMonitor({
    name: "file",
    probe: recoverSession,
    isOutage: () => true,
    logger,
  });

  const current = (): Session => {
    if (session === undefined || closing !== undefined) throw fileStoreErrors.closed(dir);
    return session;
  };

  /** Waits until the state a read saw is durable. */
  const guardedRead = async <T>(s: Session, result: Promise<T>): Promise<T> => {
    const durable = s.log.barrier();
    const [out] = await Promise.all([result, durable]);
    return out;
  };

  /** Runs a Store method, then waits until everything it saw or did is durable. */
  const guarded = <K extends keyof Methods>(name: K): Methods[K] =>
    (async (...args: unknown[]): Promise<unknown> => {
      const s = current();
      const result = (s.inner[name] as (...a: unknown[]) => Promise<unknown>)(...args);
      // Taken in the same turn as the call ran: covers exactly the state it read.
      const durable = s.log.barrier();
      const [out] = await Promise.all([result, durable]);
      return out;
    }) as Methods[K];

  // One process holds the file store's lock, so it is the whole fleet: subscriptions stay in memory.
  // Tapes are engine state, logged and fsync'd like the rest (a reader hears of an entry once it is durable).
  const fanout: FanoutStore = {
    ...createMemorySubscriptions(),
    appendTape: async (entries, now) => current().inner.appendTape(entries, now),
    readTape: async (req) => {
      const s = current();
      return guardedRead(s, s.inner.readTape(req));
    },
    tapeHead: async (signal, key) => {
      const s = current();
      return guardedRead(s, s.inner.tapeHead(signal, key));
    },
    pruneTape: async (signal, before, limit) => current().inner.pruneTape(signal, before, limit),
    subscribeTapes: (listener) => {
      tapeListeners.add(listener);
      return () => {
        tapeListeners.delete(listener);
      };
    },
  };
  const methods: Methods = {
    enqueue: guarded("enqueue"),
    claim: guarded("claim"),
    settle: guarded("settle"),
    deadLetters: guarded("deadLetters"),
    getMessage: guarded("getMessage"),
    replay: guarded("replay"),
    discard: guarded("discard"),
    stats: guarded("stats"),
    nextLeaseExpiry: guarded("nextLeaseExpiry"),
    pruneDelivered: guarded("pruneDelivered"),
    startRun: guarded("startRun"),
    acquireRun: guarded("acquireRun"),
    renewLease: guarded("renewLease"),
    append: guarded("append"),
    park: guarded("park"),
    finish: guarded("finish"),
    beginCompensation: guarded("beginCompensation"),
    releaseRun: guarded("releaseRun"),
    claimDueRuns: guarded("claimDueRuns"),
    listOrphans: guarded("listOrphans"),
    nextWakeAt: guarded("nextWakeAt"),
    wakeEarly: guarded("wakeEarly"),
    getRun: guarded("getRun"),
    getJournal: guarded("getJournal"),
    listRuns: guarded("listRuns"),
    pageMessages: guarded("pageMessages"),
    pageRuns: guarded("pageRuns"),
    runCounts: guarded("runCounts"),
    throughput: guarded("throughput"),
    heartbeat: guarded("heartbeat"),
    listInstances: guarded("listInstances"),
    removeInstance: guarded("removeInstance"),
    recordAudit: guarded("recordAudit"),
    pageAudit: guarded("pageAudit"),
    reconcileSchedules: guarded("reconcileSchedules"),
    listSchedules: guarded("listSchedules"),
    getSchedule: guarded("getSchedule"),
    setSchedulePaused: guarded("setSchedulePaused"),
    overrideSchedule: guarded("overrideSchedule"),
    fire: guarded("fire"),
    fireBatch: guarded("fireBatch"),
    recordScheduleError: guarded("recordScheduleError"),
    listFires: guarded("listFires"),
    pruneFires: guarded("pruneFires"),
    pruneRuns: guarded("pruneRuns"),
    claimIdempotencyKey: guarded("claimIdempotencyKey"),
    renewIdempotencyKey: guarded("renewIdempotencyKey"),
    completeIdempotencyKey: guarded("completeIdempotencyKey"),
    releaseIdempotencyKey: guarded("releaseIdempotencyKey"),
    getIdempotencyKey: guarded("getIdempotencyKey"),
    pruneIdempotencyKeys: guarded("pruneIdempotencyKeys"),
  };

  return {
    driver: "file",
    dir,
    ...methods,
    ...fanout,
    async open() {
      if (closing !== undefined) await closing;
      opening ??= doOpen().catch((e: unknown) => {
        opening = undefined;
        throw e;
      });
      await opening;
    },
    async close() {
      if (opening !== undefined) await opening.catch(() => undefined);
      const s = session;
      if (s === undefined) return;
      closing ??= (async () => {
        try {
          await s.log.close(options.compactOnClose ?? true);
        } finally {
          await s.lock.release();
          session = undefined;
          opening = undefined;
        }
      })().finally(() => {
        closing = undefined;
      });
      await closing;
    },
    subscribe: listeners.subscribe,
    health: () => monitor.health(),
    diagnostics() {
      const s = session;
      if (s === undefined) throw fileStoreErrors.closed(dir);
      return { ...s.log.counters, replayed: s.replayed, droppedBytes: s.droppedBytes };
    },
  };
}

function restore(dir: string, state: unknown): MemoryEngine {
  try {
    return MemoryEngine.restore(state as EngineSnapshot);
  } catch (e) {
    throw fileStoreErrors.corrupt(dir, "journal.json does not restore", e);
  }
}
