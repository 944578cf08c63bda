/** The file engine's plumbing: prepared statements, one savepoint per call, one commit (one fsync) per turn. */
import type { Db, Stmt } from "./sqlite-rows.ts";

export interface SqliteEngineOptions {
  /** Turns a failed write (disk full, I/O error) into the error callers see; the engine then refuses calls. */
  wrapFailure: (cause: unknown) => Error;
  /**
   * Asked before each commit: false when the database file is no longer the one opened (removed or
   * replaced under the process). The batch is then rolled back and failed with `StoreFileGone`,
   * never acknowledged: a commit into an unlinked file succeeds and is lost at the next open.
   */
  stillThere?: () => boolean;
}

/** The cause a batch fails with when `stillThere` said no. */
export class StoreFileGone extends Error {
  constructor() {
    super("the database file was removed or replaced while open");
  }
}

/**
 * What every part of the file engine writes through: prepared statements,
 * and `write`, which runs one call as a savepoint (it applies fully or not at
 * all) inside the batch transaction: the first write of a turn opens it
 * (BEGIN IMMEDIATE) and a setImmediate commits it, so all calls of a turn
 * share one commit and one WAL fsync (group commit). `pending()` is the
 * commit of the batch a call just read or wrote.
 */
export class SqliteBatch {
  private readonly stmts = new Map<string, Stmt>();
  private readonly inSavepoint: (fn: () => unknown) => unknown;
  private batch: { promise: Promise<void>; resolve: () => void; reject: (e: unknown) => void } | null = null;
  private failure: Error | null = null;
  /** Batches committed (one fsync each) since the engine was created. */
  commits = 0;

  constructor(
    private readonly db: Db,
    private readonly opts: SqliteEngineOptions,
  ) {
    this.inSavepoint = db.transaction((fn: () => unknown) => fn());
  }

  /** The failure that stopped the engine, if any. */
  get failed(): Error | null {
    return this.failure;
  }

  /** The commit of the open batch, or null when nothing waits to commit. */
  pending(): Promise<void> | null {
    return this.batch?.promise ?? null;
  }

  /** Commits the open batch now (close, tests). */
  flush(): void {
    this.commit();
  }

  stmt(sql: string): Stmt {
    let s = this.stmts.get(sql);
    if (s === undefined) {
      s = this.db.prepare(sql);
      this.stmts.set(sql, s);
    }
    return s;
  }
  get<T>(sql: string, ...params: unknown[]): T | undefined {
    try {
      return this.stmt(sql).get(...params) as T | undefined;
    } catch (e) {
      throw this.readFailed(e);
    }
  }
  all<T>(sql: string, ...params: unknown[]): T[] {
    try {
      return this.stmt(sql).all(...params) as T[];
    } catch (e) {
      throw this.readFailed(e);
    }
  }

  /**
   * A read that found the database damaged stops the engine as a failed write does: every later call
   * would meet the same pages, and a store that answers some calls and fails others is worse than
   * one that says it is damaged.
   */
  private readFailed(e: unknown): unknown {
    if (!isCorruption(e)) return e;
    this.fail(e);
    return this.failure;
  }
  run(sql: string, ...params: unknown[]): number {
    return this.stmt(sql).run(...params).changes;
  }

  check(): void {
    if (this.failure !== null) throw this.failure;
  }

  /** Runs `fn` as one all-or-nothing step of the open batch. */
  write<T>(fn: () => T): T {
    this.check();
    try {
      if (!this.db.inTransaction) {
        this.db.exec("BEGIN IMMEDIATE");
        if (this.batch === null) {
          let resolve: () => void = () => undefined;
          let reject: (e: unknown) => void = () => undefined;
          const promise = new Promise<void>((res, rej) => {
            resolve = res;
            reject = rej;
          });
          // Nobody may await a batch (a write that changed nothing); its failure still stops the engine.
          promise.catch(() => undefined);
          this.batch = { promise, resolve, reject };
          setImmediate(() => this.commit());
        }
      }
      return this.inSavepoint(fn) as T;
    } catch (e) {
      if (isIoFailure(e)) this.fail(e);
      throw this.failure ?? e;
    }
  }

  /**
   * One COMMIT = one fsync of the WAL (synchronous=FULL). The event loop is
   * blocked for the turn's statements plus that fsync, so a turn's work is the
   * bound: measured with bench/file-drain.ts on the loaded 2-core dev box
   * (load 5-7), a turn of 1 single-message enqueue took 0.15-1.2 ms, of 16
   * 0.4-1.6 ms, of 256 3.5-6 ms, statements and fsync included.
   */
  private commit(): void {
    const b = this.batch;
    if (b === null) return;
    this.batch = null;
    if (this.failure !== null) {
      b.reject(this.failure);
      return;
    }
    if (this.opts.stillThere?.() === false) {
      this.batch = b;
      this.fail(new StoreFileGone());
      return;
    }
    try {
      if (this.db.inTransaction) this.db.exec("COMMIT");
      this.commits++;
      b.resolve();
    } catch (e) {
      this.fail(e);
      b.reject(this.failure);
    }
  }

  private fail(cause: unknown): void {
    if (this.failure === null) this.failure = this.opts.wrapFailure(cause);
    try {
      if (this.db.inTransaction) this.db.exec("ROLLBACK");
    } catch {
      // The connection is abandoned and reopened by the store's recovery.
    }
    const b = this.batch;
    this.batch = null;
    b?.reject(this.failure);
  }
}

/** A SQLite error that means the disk did not take the write (full, I/O, read-only), not a bad call. */
export function isIoFailure(e: unknown): boolean {
  const code = (e as { code?: unknown } | null)?.code;
  return (
    typeof code === "string" &&
    (code.startsWith("SQLITE_FULL") ||
      code.startsWith("SQLITE_IOERR") ||
      code.startsWith("SQLITE_READONLY") ||
      code.startsWith("SQLITE_CANTOPEN") ||
      code.startsWith("SQLITE_CORRUPT") ||
      code.startsWith("SQLITE_NOTADB") ||
      code === "SQLITE_BUSY")
  );
}

/** SQLite found the database file damaged (not the disk refusing a write): no probe makes it writable again. */
export function isCorruption(e: unknown): boolean {
  const code = (e as { code?: unknown } | null)?.code;
  return typeof code === "string" && (code.startsWith("SQLITE_CORRUPT") || code.startsWith("SQLITE_NOTADB"));
}
