/** The file driver: the Store contract on a SQLite database (better-sqlite3, WAL) in one directory. */
import { statSync } from "node:fs";
import { join, resolve } from "node:path";
import { isOkeError } from "../../errors.ts";
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
import { checkWal } from "./sqlite/wal-check.ts";
import { isCorruption, StoreFileGone } from "./sqlite/sqlite-batch.ts";
import { SqliteEngine } from "./sqlite/sqlite-engine.ts";

/** An open that failed because the directory or its files may not be written (not a full disk). */
const notWritable = (e: unknown): boolean => {
  if (isOkeError(e)) return false;
  const code = (e as { code?: unknown } | null)?.code;
  return (
    code === "EROFS" ||
    code === "EACCES" ||
    code === "EPERM" ||
    (typeof code === "string" && (code.startsWith("SQLITE_READONLY") || code.startsWith("SQLITE_CANTOPEN")))
  );
};

/**
 * Delivered messages one prune commit deletes. 300 000 in one DELETE took 0.7 s here (about 2.3 µs
 * a message), so a batch holds the event loop ~10 ms.
 */
const PRUNE_BATCH = 5_000;
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
  /**
   * Told about a legacy import, a torn old log tail cut off, a dead process's lock taken over, and
   * an Idempotency-Key claim or answer whose commit failed after it was acknowledged.
   */
  logger?: Pick<Logger, "info" | "warn"> & Partial<Pick<Logger, "error">>;
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
 * one fsync (group commit, see SqliteBatch), and a call — a read included —
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
    // Before SQLite reads it: its recovery stops at the first frame that fails and drops the rest,
    // which after disk damage includes transactions that were acknowledged.
    const wal = checkWal(join(dir, `${DB_FILE}-wal`));
    if (wal?.damage !== undefined)
      throw fileStoreErrors.walDamaged(
        dir,
        wal.damage.offset,
        wal.damage.frame,
        wal.damage.commitsAfter,
        wal.size,
      );
    let db: SqliteDb;
    try {
      db = openDb(join(dir, DB_FILE));
    } catch (e) {
      if (e instanceof NewerSchemaError)
        throw fileStoreErrors.newer(dir, e.dbVersion, e.codeVersion, e.needs, e.appliedBy);
      const code = (e as { code?: unknown }).code;
      if (code === "SQLITE_NOTADB" || code === "SQLITE_CORRUPT")
        throw fileStoreErrors.corrupt(dir, `${DB_FILE} is not a readable SQLite database`, e);
      if (notWritable(e)) throw fileStoreErrors.notWritable(dir, e);
      throw fileStoreErrors.failed(dir, e);
    }
    try {
      const imported = (await importLegacy(dir, db, logger)) ?? null;
      // The file opened, by identity: a commit first checks the path still names it (one stat per
      // commit, i.e. per event-loop turn that wrote; ~µs against the commit's fsync).
      const dbFile = join(dir, DB_FILE);
      const opened = statSync(dbFile);
      const engine = new SqliteEngine(db, {
        wrapFailure: (cause) => {
          const err =
            cause instanceof StoreFileGone
              ? fileStoreErrors.removed(dir, DB_FILE)
              : isCorruption(cause)
                ? fileStoreErrors.malformed(dir, cause)
                : fileStoreErrors.failed(dir, cause);
          monitor.failed(err);
          return err;
        },
        stillThere: () => {
          try {
            const now = statSync(dbFile);
            return now.ino === opened.ino && now.dev === opened.dev;
          } catch {
            return false;
          }
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
    // A directory this process may not write (a read-only mount, another user's files): said once,
    // with the path and the fix, rather than a bare "EROFS" or "attempt to write a readonly database".
    let tookOver = false;
    const lock = await ensureDir(dir)
      .then(() =>
        acquireLock(dir, (pid) => {
          tookOver = true;
          logger?.warn(
            { dir, pid },
            `file store: took over the lock of process ${pid ?? "?"}, which is gone`,
          );
        }),
      )
      .catch((e: unknown) => {
        // ENOENT from creating the directory: a path that cannot be made (a read-only mount's parent).
        const missing = (e as { code?: unknown } | null)?.code === "ENOENT";
        throw notWritable(e) || missing ? fileStoreErrors.notWritable(dir, e) : e;
      });
    try {
      session = await openSession(lock);
      // Only when the lock was taken over from a process that died holding it (the kernel lock was
      // free): every lease in the store is that process's. Not after a close, whose handlers may
      // still run in this process, nor at a reopen after a failed write (this process's own leases).
      const ended = tookOver ? session.engine.endLeasesOfGoneProcesses() : { messages: 0, runs: 0 };
      await session.engine.pending();
      if (ended.messages + ended.runs > 0)
        logger?.info(
          { dir, ...ended },
          `file store: ${ended.messages} message(s) and ${ended.runs} run(s) held by a process that is gone are claimable now, not after their lease`,
        );
    } catch (e) {
      session?.db.close();
      session = undefined;
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
    // Reopening would start an empty store under the same name and serve it as if nothing happened;
    // or, for a damaged database, serve until the next call meets the damaged pages again.
    if (
      isOkeError(failed.engine.failed) &&
      (failed.engine.failed.code === "OKE1325" || failed.engine.failed.code === "OKE1328")
    )
      throw failed.engine.failed;
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
  const guarded = <
    K extends
      keyof Methods | "readTape" | "tapeHead" | "tapeGap" | "lastTapePosition" | "appendTape" | "pruneTape",
  >(
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

  /**
   * The Idempotency-Key claim and answer resolve once they ran in the turn's transaction, not after
   * its commit (the fsync): a keyed request then waits for no fsync of its own, only for those of
   * the writes its flow makes, which it waits for anyway. Why that cannot make an answer wrong:
   * - Batches commit in order on the one connection, and everything a request does durably comes
   *   after its claim — a durable run, an emit (each still resolving only once committed), the
   *   answer. A process crash before the claim's commit loses it with all of those: nothing of the
   *   request survived but possibly an answer already sent. The retry then runs the request afresh.
   * - A crash after the claim's commit but before the answer's: the retry takes the key over once
   *   the lock lapsed and runs the flow again with the same run id: a durable run continues, a plain
   *   flow's emits are refused as duplicates (fx.ts nextId), and it answers what it computes now.
   * - A failed commit (disk full, I/O error) rolls the batch back and stops the store until it
   *   recovers; it is reported by the store's health and logged here with the key. A flow whose
   *   claim was rolled back and that writes only after the recovery runs as if unclaimed: a retry
   *   in between runs the request too (as the PostgreSQL claim's crash case, see
   *   postgres-idempotency.ts).
   * Their reads stay in the batch they ran in: a retry in the same turn sees the running claim
   * (409) or the answer, as it would a moment later.
   */
  const acknowledged = (s: Session, key: string, what: string): void => {
    s.engine.pending()?.catch((err: unknown) => {
      (logger?.error ?? logger?.warn)?.call(
        logger,
        { err, key },
        `file store: the Idempotency-Key ${what} was acknowledged but its commit failed; a retry may run the request again`,
      );
    });
  };
  const idempotencyNow = {
    // async: a refusal (closed, failed) rejects rather than throws.
    async claimIdempotencyKey(req) {
      const s = current();
      const { claim, changed } = s.engine.claimIdempotency(req);
      if (changed) acknowledged(s, req.key, "claim");
      return claim;
    },
    async completeIdempotencyKey(req) {
      const s = current();
      const outcome = s.engine.completeIdempotency(req);
      if (outcome !== "superseded") acknowledged(s, req.key, "answer");
      return outcome;
    },
  } satisfies Pick<Store, "claimIdempotencyKey" | "completeIdempotencyKey">;

  // One process holds the file store's lock, so it is the whole fleet: subscriptions stay in memory.
  // Tapes are tables like the rest (a reader hears of an entry once it is committed).
  const fanout: FanoutStore = {
    ...createMemorySubscriptions(),
    appendTape: guarded("appendTape"),
    readTape: guarded("readTape"),
    tapeHead: guarded("tapeHead"),
    tapeGap: guarded("tapeGap"),
    lastTapePosition: guarded("lastTapePosition"),
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
    releaseClaimed: guarded("releaseClaimed"),
    leaveClaimsToLease: guarded("leaveClaimsToLease"),
    deadLetters: guarded("deadLetters"),
    getMessage: guarded("getMessage"),
    replay: guarded("replay"),
    resettleDelivered: guarded("resettleDelivered"),
    discard: guarded("discard"),
    discardPending: guarded("discardPending"),
    stats: guarded("stats"),
    nextLeaseExpiry: guarded("nextLeaseExpiry"),
    // In batches, each its own commit, yielding between them: one DELETE of 300 000 delivered messages
    // held the event loop (and every request) for 0.7 s.
    pruneDelivered: async (before) => {
      let total = 0;
      for (;;) {
        const s = current();
        const n = s.engine.pruneDelivered(before, PRUNE_BATCH);
        await s.engine.pending();
        total += n;
        if (n < PRUNE_BATCH) return total;
        await new Promise<void>((resolve) => setImmediate(resolve));
      }
    },
    startRun: guarded("startRun"),
    acquireRun: guarded("acquireRun"),
    renewLease: guarded("renewLease"),
    append: guarded("append"),
    park: guarded("park"),
    finish: guarded("finish"),
    beginCompensation: guarded("beginCompensation"),
    releaseRun: guarded("releaseRun"),
    leaveToLease: guarded("leaveToLease"),
    claimDueRuns: guarded("claimDueRuns"),
    listOrphans: guarded("listOrphans"),
    nextWakeAt: guarded("nextWakeAt"),
    wakeEarly: guarded("wakeEarly"),
    terminateRun: guarded("terminateRun"),
    getRun: guarded("getRun"),
    getJournal: guarded("getJournal"),
    getJournalEnds: guarded("getJournalEnds"),
    listRuns: guarded("listRuns"),
    pageMessages: guarded("pageMessages"),
    pageRuns: guarded("pageRuns"),
    runCounts: guarded("runCounts"),
    queueBacklog: guarded("queueBacklog"),
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
    ...idempotencyNow,
    renewIdempotencyKey: guarded("renewIdempotencyKey"),
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
