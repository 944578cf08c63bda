/** Opens the file driver's SQLite database: WAL, synchronous=FULL, the numbered migrations. */
import type Database from "better-sqlite3";
import { openSqlite } from "./native.ts";
import { okengineVersion } from "../../../okengine-version.ts";
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
  const db = openSqlite(file);
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
  constructor(
    /** The store's last migration. */
    readonly dbVersion: number,
    /** The last migration this code knows. */
    readonly codeVersion: number,
    /** The oldest code the store's unknown migrations leave working, as a migration id. */
    readonly needs: number,
    /** The okengine version that applied the store's last migration, when it recorded one. */
    readonly appliedBy: string | undefined,
  ) {
    super(
      `its schema is at migration ${dbVersion}${appliedBy === undefined ? "" : ` (applied by okengine ${appliedBy})`}, ` +
        `newer than this okengine (${okengineVersion()}) knows: ${codeVersion}`,
    );
  }
}

interface MigrationRow {
  id: number;
  runs_with?: number | null;
  okengine?: string | null;
}

/** A store's migrations against what this code knows. */
export interface SchemaState {
  /** The store's last migration (0: none). */
  dbVersion: number;
  /** The last migration this code knows. */
  codeVersion: number;
  /** The oldest code the store's unknown migrations leave working, as a migration id (0: none unknown). */
  needs: number;
  /** The okengine version that applied the store's last migration, when it recorded one. */
  appliedBy: string | undefined;
}

/** The state of `rows` (the bookkeeping table, by id): one rule for the open and for `oke doctor`. */
function schemaStateOf(rows: readonly MigrationRow[], migrations: readonly SqliteMigration[]): SchemaState {
  const codeVersion = Math.max(0, ...migrations.map((m) => m.id));
  const last = rows.at(-1);
  return {
    dbVersion: last?.id ?? 0,
    codeVersion,
    needs: Math.max(0, ...rows.filter((r) => r.id > codeVersion).map((r) => r.runs_with ?? r.id)),
    appliedBy: last?.okengine ?? undefined,
  };
}

/**
 * Applies the migrations the database has not seen, each in its own transaction. The bookkeeping
 * table records with each the oldest code it leaves working (runs_with) and who applied it
 * (okengine): columns added to a table made before them, as older code never reads them.
 */
export function migrate(db: SqliteDb, migrations: readonly SqliteMigration[]): number[] {
  db.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
    id INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL, runs_with INTEGER, okengine TEXT)`);
  const columns = new Set(
    (db.prepare("SELECT name FROM pragma_table_info('schema_migrations')").all() as { name: string }[]).map(
      (c) => c.name,
    ),
  );
  const rows = db.prepare("SELECT * FROM schema_migrations ORDER BY id").all() as MigrationRow[];
  const done = new Set(rows.map((r) => r.id));
  const state = schemaStateOf(rows, migrations);
  if (state.dbVersion > state.codeVersion) {
    // Newer than this code: it runs only if every migration it does not know leaves code this old
    // working; nothing is applied then (there is nothing it knows to add).
    if (state.needs > state.codeVersion)
      throw new NewerSchemaError(state.dbVersion, state.codeVersion, state.needs, state.appliedBy);
    return [];
  }
  const pending = [...migrations].sort((a, b) => a.id - b.id).filter((m) => !done.has(m.id));
  if (pending.length === 0) return [];
  if (!columns.has("runs_with")) db.exec("ALTER TABLE schema_migrations ADD COLUMN runs_with INTEGER");
  if (!columns.has("okengine")) db.exec("ALTER TABLE schema_migrations ADD COLUMN okengine TEXT");
  const record = db.prepare(
    "INSERT INTO schema_migrations (id, name, applied_at, runs_with, okengine) VALUES (?, ?, ?, ?, ?)",
  );
  const applied: number[] = [];
  for (const m of pending) {
    db.transaction(() => {
      db.exec(m.sql);
      record.run(m.id, m.name, Date.now(), m.runsWith ?? m.id, okengineVersion());
    })();
    applied.push(m.id);
  }
  return applied;
}

/**
 * The store's migration state as `oke doctor` reports it, read-only: its last migration, who applied
 * it, what this code knows, and the oldest code its unknown migrations leave working. Undefined when
 * the file has no migrations table or cannot be read (quick_check reports that).
 */
export function readSchemaState(
  file: string,
  migrations: readonly SqliteMigration[] = sqliteMigrations,
): SchemaState | undefined {
  let db: SqliteDb | undefined;
  try {
    db = openSqlite(file, { readonly: true, fileMustExist: true });
    const rows = db.prepare("SELECT * FROM schema_migrations ORDER BY id").all() as MigrationRow[];
    return schemaStateOf(rows, migrations);
  } catch {
    return undefined;
  } finally {
    db?.close();
  }
}

/**
 * SQLite's own consistency check of a database file (`PRAGMA quick_check`),
 * opened read-only: the problems it lists, or [] when intact. A file SQLite
 * cannot read at all is one problem.
 */
export function checkDb(file: string): string[] {
  let db: SqliteDb | undefined;
  try {
    db = openSqlite(file, { readonly: true, fileMustExist: true });
    const rows = db.pragma("quick_check") as { quick_check: string }[];
    const problems = rows.map((r) => r.quick_check).filter((r) => r !== "ok");
    return problems;
  } catch (e) {
    return [e instanceof Error ? e.message : String(e)];
  } finally {
    db?.close();
  }
}
