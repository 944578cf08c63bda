/** The file driver: the Store contract on a SQLite database (better-sqlite3, WAL) in one directory. */
import { join, resolve } from "node:path";
import type { Logger } from "../../log/logger.ts";
import { createEngineStore } from "../memory/index.ts";
import { createHealthMonitor } from "../store-health.ts";
import { createStoreListeners } from "../store-listeners.ts";
import type { FanoutStore, TapeRef } from "../fanout-types.ts";
import { createMemorySubscriptions } from "../memory/memory-fanout.ts";
import type { Store } from "../types.ts";
import { fileStoreErrors } from "./file-errors.ts";
import { acquireLock, type HeldLock } from "./file-lock.ts";
import { ensureDir, probeWritable } from "./durable-fs.ts";
import { importLegacy, type LegacyImport } from "./sqlite/import-legacy.ts";
import { DB_FILE, NewerSchemaError, openDb, type SqliteDb } from "./sqlite/sqlite-db.ts";
import { SqliteEngine } from "./sqlite/sqlite-engine.ts";

export interface FileStoreOptions {
  /**
   * Directory of the store, created if missing; by convention `.oke` beside
   * the app. It holds `store.db` (a SQLite database in WAL mode, with its
   * `store.db-wal` and `store.db-shm` while open) and `lock` (the pid of the
   * process that has it open). A directory of the old format (`journal.json`,
   * `journal.log`) is imported into `store.db` on the first open and its
   * files are kept as `*.imported`.
   */
  dir: string;
  /** Told about a legacy import, a torn old log tail cut off, and a dead process's lock taken over. */
  logger?: Pick<Logger, "info" | "warn">;
}

export interface FileStoreDiagnostics {
  /** Transactions committed (one WAL fsync each) since open, however many calls shared each. */
  commits: number;
  /** What the last open() imported from the old format, if it did. */
  imported: LegacyImport | null;
  /** SQLite's journal mode: "wal". */
  journalMode: string;
  /** SQLite's synchronous level: 2 = FULL (the WAL is fsync'd by every commit). */
  synchronous: number;
}

/** The file driver: the Store contract plus counters for tests and benchmarks. */
export interface FileStore extends Store {
  readonly driver: "file";
  /** Absolute path of the store directory. */
  readonly dir: string;
  diagnostics(): FileStoreDiagnostics;
}

type Methods = Omit<Store, "driver" | "open" | "close" | "subscribe" | "health" | keyof FanoutStore>;

interface Session {
  db: SqliteDb;
  engine: SqliteEngine;
  inner: Store;
  lock: HeldLock;
  imported: LegacyImport | null;
}

/**
 * Durable storage for one machine. Every call is one short transaction step
 * on prepared statements; calls of one event-loop turn share one commit and
 * one fsync (group commit, see SqliteEngine), and a call — a read included —
 * resolves only once the state it wrote or saw is committed.
 */
export function createFileStore(options: FileStoreOptions): FileStore {
  const dir = resolve(options.dir);
  const logger = options.logger;
  const listeners = createStoreListeners(logger);
  const tapeListeners = new Set<(tape: TapeRef | "all") => void>();
  const tellTapes = (tape: TapeRef | "all"): void => {
    for (const l of [...tapeListeners]) l(tape);
  };
  let session: Session | undefined;
  let opening: Promise<void> | undefined;
  let closing: Promise<void> | undefined;

  const openSession = async (lock: HeldLock): Promise<Session> => {
    let db: SqliteDb;
    try {
      db = openDb(join(dir, DB_FILE));
    } catch (e) {
      if (e instanceof NewerSchemaError) throw fileStoreErrors.corrupt(dir, `${DB_FILE}: ${e.message}`, e);
      const code = (e as { code?: unknown }).code;
      if (code === "SQLITE_NOTADB" || code === "SQLITE_CORRUPT")
        throw fileStoreErrors.corrupt(dir, `${DB_FILE} is not a readable SQLite database`, e);
      throw fileStoreErrors.failed(dir, e);
    }
    try {
      const imported = (await importLegacy(dir, db, logger)) ?? null;
      const engine = new SqliteEngine(db, {
        wrapFailure: (cause) => {
          const err = fileStoreErrors.failed(dir, cause);
          monitor.failed(err);
          return err;
        },
      });
      const inner = createEngineStore({
        driver: "file",
        engine,
        ...(logger ? { logger } : {}),
        persist: () => engine.pending() ?? undefined,
      });
      inner.subscribe(listeners.emit);
      inner.subscribeTapes(tellTapes);
      return { db, engine, inner, lock, imported };
    } catch (e) {
      db.close();
      throw e;
    }
  };

  const doOpen = async (): Promise<void> => {
    await ensureDir(dir);
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
   * call. The failed transaction was rolled back, so the database holds exactly
   * the acknowledged writes; once a probe write succeeds, the connection is
   * reopened and the store serves again by itself.
   */
  const recoverSession = async (): Promise<void> => {
    const failed = session;
    if (failed === undefined || closing !== undefined || failed.engine.failed === null) return;
    await probeWritable(dir);
    try {
      failed.db.close();
    } catch {
      // Already unusable; the fresh connection below replaces it.
    }
    const fresh = await openSession(failed.lock);
    if (session !== failed || closing !== undefined) {
      fresh.db.close();
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

  /** Runs a Store method, then waits until everything it saw or did is committed. */
  const guarded = <K extends keyof Methods | "readTape" | "tapeHead" | "appendTape" | "pruneTape">(
    name: K,
  ): Store[K] =>
    (async (...args: unknown[]): Promise<unknown> => {
      const s = current();
      const result = (s.inner[name] as (...a: unknown[]) => Promise<unknown>)(...args);
      // Taken in the same turn as the call ran: the batch whose state it read or wrote.
      const durable = s.engine.pending();
      const [out] = await Promise.all([result, durable]);
      return out;
    }) as Store[K];

  // One process holds the file store's lock, so it is the whole fleet: subscriptions stay in memory.
  // Tapes are tables like the rest (a reader hears of an entry once it is committed).
  const fanout: FanoutStore = {
    ...createMemorySubscriptions(),
    appendTape: guarded("appendTape"),
    readTape: guarded("readTape"),
    tapeHead: guarded("tapeHead"),
    pruneTape: guarded("pruneTape"),
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
          // Commit what this turn wrote (its callers are waiting on it), then close: the last
          // connection's close checkpoints the WAL into store.db.
          s.engine.flush();
          s.db.close();
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
      return {
        commits: s.engine.commits,
        imported: s.imported,
        journalMode: String(s.db.pragma("journal_mode", { simple: true })),
        synchronous: Number(s.db.pragma("synchronous", { simple: true })),
      };
    },
  };
}
