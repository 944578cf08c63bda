/** Opens the file driver's SQLite database: WAL, synchronous=FULL, the numbered migrations. */
import Database from "better-sqlite3";
import { sqliteMigrations, type SqliteMigration } from "./migrations/index.ts";

export type SqliteDb = Database.Database;

/** The database file inside the store directory. */
export const DB_FILE = "store.db";

/**
 * WAL: a commit appends to the WAL and fsyncs it once (synchronous=FULL makes
 * that fsync part of every COMMIT, so a resolved call survives power loss);
 * readers never block the writer. The WAL is folded back into the database by
 * SQLite's automatic checkpoint (every ~1 000 pages) and on close.
 */
export function openDb(file: string, migrations: readonly SqliteMigration[] = sqliteMigrations): SqliteDb {
  const db = new Database(file);
  try {
    db.pragma("journal_mode = WAL");
    db.pragma("synchronous = FULL");
    // One process holds the store (the lock file): a busy database is a bug, never waited on.
    db.pragma("busy_timeout = 0");
    migrate(db, migrations);
    return db;
  } catch (e) {
    db.close();
    throw e;
  }
}

/** Thrown when the database was migrated past what this version knows (a newer okengine wrote it). */
export class NewerSchemaError extends Error {
  constructor(readonly id: number) {
    super(`its schema is at migration ${id}, newer than this version of okengine knows`);
  }
}

/** Applies the migrations the database has not seen, each in its own transaction. */
export function migrate(db: SqliteDb, migrations: readonly SqliteMigration[]): number[] {
  db.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
    id INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`);
  const done = new Set(
    (db.prepare("SELECT id FROM schema_migrations").all() as { id: number }[]).map((r) => r.id),
  );
  const known = new Set(migrations.map((m) => m.id));
  for (const id of done) if (!known.has(id)) throw new NewerSchemaError(id);
  const applied: number[] = [];
  for (const m of [...migrations].sort((a, b) => a.id - b.id)) {
    if (done.has(m.id)) continue;
    db.transaction(() => {
      db.exec(m.sql);
      db.prepare("INSERT INTO schema_migrations (id, name, applied_at) VALUES (?, ?, ?)").run(
        m.id,
        m.name,
        Date.now(),
      );
    })();
    applied.push(m.id);
  }
  return applied;
}

/**
 * SQLite's own consistency check of a database file (`PRAGMA quick_check`),
 * opened read-only: the problems it lists, or [] when intact. A file SQLite
 * cannot read at all is one problem.
 */
export function checkDb(file: string): string[] {
  let db: SqliteDb | undefined;
  try {
    db = new Database(file, { readonly: true, fileMustExist: true });
    const rows = db.pragma("quick_check") as { quick_check: string }[];
    const problems = rows.map((r) => r.quick_check).filter((r) => r !== "ok");
    return problems;
  } catch (e) {
    return [e instanceof Error ? e.message : String(e)];
  } finally {
    db?.close();
  }
}
