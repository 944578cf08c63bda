/** The file driver's lock: one process per .oke directory, by a kernel lock and a lock file naming the holder. */
import { randomBytes } from "node:crypto";
import type Database from "better-sqlite3";
import { openSqlite } from "./sqlite/native.ts";
import { link, readFile, rename, unlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { ensureDir, errnoCode } from "./durable-fs.ts";
import { fileStoreErrors } from "./file-errors.ts";

/** Lock files this process holds, to tell "held by this process" from "left by a previous one with our pid". */
const heldHere = new Set<string>();

/** The guard database beside the lock file; only its lock matters, its one row names the holder. */
const GUARD_FILE = "lock.db";

/**
 * Takes the kernel's lock on `<dir>/lock.db` (SQLite in EXCLUSIVE locking mode holds its POSIX lock
 * from the first write until close, and the kernel drops it when the process dies), or undefined when
 * another process holds it. The pid in the lock file cannot tell a live holder from a dead one with
 * the same pid in another PID namespace — two containers sharing a volume are both pid 1 — so the
 * lock file alone let a second container take over a live store; the kernel lock does not.
 */
function takeGuard(dir: string): Database.Database | undefined {
  const db = openSqlite(join(dir, GUARD_FILE));
  try {
    db.pragma("busy_timeout = 0");
    db.pragma("locking_mode = EXCLUSIVE");
    db.exec("CREATE TABLE IF NOT EXISTS holder (id INTEGER PRIMARY KEY, pid INTEGER NOT NULL)");
    db.prepare("INSERT OR REPLACE INTO holder (id, pid) VALUES (1, ?)").run(process.pid);
    return db;
  } catch (e) {
    db.close();
    if ((e as { code?: unknown }).code === "SQLITE_BUSY") return undefined;
    throw e;
  }
}

export interface HeldLock {
  readonly path: string;
  release(): Promise<void>;
}

/** True when a process with this pid exists (EPERM: it exists but belongs to another user). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return errnoCode(e) !== "ESRCH";
  }
}

const readPid = async (path: string): Promise<{ text: string; pid: number | undefined } | undefined> => {
  try {
    const text = await readFile(path, "utf8");
    const pid = Number.parseInt(text.trim(), 10);
    return { text, pid: Number.isSafeInteger(pid) && pid > 0 ? pid : undefined };
  } catch (e) {
    if (errnoCode(e) === "ENOENT") return undefined;
    throw e;
  }
};

const unlinkQuiet = async (path: string): Promise<void> => {
  try {
    await unlink(path);
  } catch (e) {
    if (errnoCode(e) !== "ENOENT") throw e;
  }
};

/**
 * Takes the directory for this process: first the kernel lock on `lock.db` (refused at once while
 * another process holds it), then `<dir>/lock`, the file naming the holder's pid for people and for
 * versions of okengine before the kernel lock. The file is written complete under a temp name and
 * hard-linked into place (link never overwrites), so nobody ever reads a half-written lock. A lock
 * whose pid is dead is moved aside by rename (atomic: of two racing openers only one gets it) and
 * checked before removal.
 */
export async function acquireLock(
  dir: string,
  onTakeover?: (stalePid: number | undefined) => void,
): Promise<HeldLock> {
  await ensureDir(dir);
  const path = join(dir, "lock");
  const mine = `${process.pid}\n`;
  const guard = takeGuard(dir);
  if (guard === undefined) {
    // Held by a live process (the kernel says so): the lock file names it, unless it is being replaced.
    const holder = await readPid(path);
    throw fileStoreErrors.locked(dir, holder?.pid);
  }
  try {
    return await takeLockFile(dir, path, mine, guard, onTakeover);
  } catch (e) {
    guard.close();
    throw e;
  }
}

async function takeLockFile(
  dir: string,
  path: string,
  mine: string,
  guard: Database.Database,
  onTakeover: ((stalePid: number | undefined) => void) | undefined,
): Promise<HeldLock> {
  const tmp = join(dir, `lock.${process.pid}.${randomBytes(4).toString("hex")}.tmp`);
  await writeFile(tmp, mine);
  try {
    for (let attempt = 0; attempt < 20; attempt++) {
      try {
        await link(tmp, path);
        heldHere.add(path);
        return { path, release: () => releaseLock(path, mine, guard) };
      } catch (e) {
        if (errnoCode(e) !== "EEXIST") throw e;
      }
      const holder = await readPid(path);
      if (!holder) continue; // released between our link and read: try again
      // Our own pid in a lock we do not hold: a previous process that had the same pid (a
      // container's app is often pid 1 on every start) died holding it — a live one, in another
      // PID namespace, would hold the kernel lock we were just given.
      const ours = holder.pid === process.pid && !heldHere.has(path);
      if (holder.pid !== undefined && !ours && processAlive(holder.pid))
        throw fileStoreErrors.locked(dir, holder.pid);
      // Stale: move it aside, then make sure what we moved is the stale lock we judged.
      const aside = join(dir, `lock.stale.${process.pid}.${randomBytes(4).toString("hex")}`);
      try {
        await rename(path, aside);
      } catch (e) {
        if (errnoCode(e) === "ENOENT") continue;
        throw e;
      }
      const moved = await readPid(aside);
      if (moved && moved.text !== holder.text) {
        // A racing opener had already replaced it: put its fresh lock back.
        try {
          await link(aside, path);
        } catch (e) {
          if (errnoCode(e) !== "EEXIST") throw e;
        }
      } else {
        onTakeover?.(holder.pid);
      }
      await unlinkQuiet(aside);
    }
    throw new Error(`could not take the lock "${path}" after 20 attempts`);
  } finally {
    await unlinkQuiet(tmp);
  }
}

async function releaseLock(path: string, mine: string, guard: Database.Database): Promise<void> {
  heldHere.delete(path);
  try {
    const holder = await readPid(path);
    // Only remove our own lock: after a takeover the file may name someone else.
    if (holder?.text === mine) await unlinkQuiet(path);
  } finally {
    guard.close();
  }
}
