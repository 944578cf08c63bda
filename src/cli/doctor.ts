/** `oke doctor`: checks the file store (store.db, or an old-format log not yet imported); `--salvage` keeps every valid record of such a log. */
import { existsSync, statSync } from "node:fs";
import { join, resolve } from "node:path";
import { CliError } from "../project/load-project.ts";
import { LOG_FILE } from "../store/file/recovery.ts";
import { inspectFileLog, salvageFileLog, type DamagedRange } from "../store/file/salvage.ts";
import { okengineVersion } from "../okengine-version.ts";
import { acquireLock } from "../store/file/file-lock.ts";
import { DB_FILE, checkDb, readSchemaState } from "../store/file/sqlite/sqlite-db.ts";
import { checkWal, salvageWal } from "../store/file/sqlite/wal-check.ts";

export interface DoctorFlags {
  salvage?: boolean;
  /** The store directory; default `<dir>/.oke`. */
  store?: string;
}

const isDir = (path: string): boolean => existsSync(path) && statSync(path).isDirectory();

const describe = (d: DamagedRange, size: number): string =>
  `  bytes ${d.offset}–${d.offset + d.bytes - 1} (${d.bytes} bytes)${d.offset + d.bytes === size ? ", up to the end of the file" : ""}`;

/** Prints what it found; exit code 1 when damage is found and left in place, or there is no store to check. */
export async function runDoctor(dir: string, flags: DoctorFlags): Promise<void> {
  const root = resolve(dir);
  if (!isDir(root)) throw new CliError(`oke doctor: directory "${dir}" not found`);
  const storeDir = resolve(root, flags.store ?? ".oke");
  const db = join(storeDir, DB_FILE);
  // Nothing to check is not "intact": a mistyped directory or --store must not pass, and --salvage
  // (which takes the store's lock) must not create a store where there was none.
  if (!existsSync(join(storeDir, LOG_FILE)) && !existsSync(db))
    throw new CliError(
      isDir(storeDir)
        ? `oke doctor: ${storeDir} holds no file store (neither ${DB_FILE} nor ${LOG_FILE}); nothing to check`
        : `oke doctor: no file store at ${storeDir}; nothing to check${flags.store === undefined ? " (the file driver creates it when the app first starts; --store names another)" : ""}`,
    );
  // A store on SQLite (no old log waiting for its import): SQLite's own check; a torn WAL tail it
  // discards by itself, so there is nothing to salvage.
  if (!existsSync(join(storeDir, LOG_FILE)) && existsSync(db)) {
    // The WAL first, before anything opens the database: SQLite's recovery would drop what follows a
    // damaged frame, and quick_check would then find the rest intact.
    const wal = checkWal(`${db}-wal`);
    // A WAL an app is writing can restart under the read (a checkpoint), which reads like damage:
    // found damage counts only with the store's lock taken (refused while its process lives).
    const held =
      wal?.damage === undefined
        ? undefined
        : await acquireLock(storeDir, () => undefined).catch(() => undefined);
    if (wal?.damage !== undefined && held === undefined)
      console.log(
        `oke doctor: ${db}-wal is being written by a running app; its WAL is checked when no process has the store open`,
      );
    else await held?.release();
    if (wal?.damage !== undefined && held !== undefined) {
      const d = wal.damage;
      const where = `byte ${d.offset} (${d.frame === 0 ? "its header" : `frame ${d.frame}`})`;
      if (!flags.salvage) {
        console.log(
          `oke doctor: ${db}-wal is damaged at ${where}; ${d.commitsAfter} transaction(s) committed after it would be lost when SQLite opens it.`,
        );
        console.log(
          `Copy "${storeDir}" aside, then restore it from a backup, or run \`oke doctor --salvage${flags.store ? ` --store ${flags.store}` : ""} ${dir}\` to keep what precedes the damage.`,
        );
        process.exitCode = 1;
        return;
      }
      const lock = await acquireLock(storeDir, () => undefined);
      try {
        const sideFile = `${db}-wal.damaged-${new Date().toISOString().replace(/[:.]/g, "-")}`;
        salvageWal(db, sideFile);
        console.log(
          `oke doctor --salvage: kept what ${db}-wal held before ${where}; the ${d.commitsAfter} transaction(s) committed after it are lost.`,
        );
        console.log(`The WAL as it was is in ${sideFile}. Check the messages and runs written last.`);
      } finally {
        await lock.release();
      }
    }
    const problems = checkDb(db);
    if (problems.length === 0) {
      console.log(
        `oke doctor: ${db} is intact (SQLite quick_check)${flags.salvage ? "; nothing to salvage" : ""}`,
      );
      // Intact, yet this okengine may not open it: say so here rather than at the next boot.
      const state = readSchemaState(db);
      if (state !== undefined && state.needs > state.codeVersion)
        console.log(
          `Its schema is at migration ${state.dbVersion}${state.appliedBy === undefined ? "" : ` (applied by okengine ${state.appliedBy})`}, ` +
            `newer than this okengine (${okengineVersion()}) knows (${state.codeVersion}): this version refuses to open it (OKE1326). ` +
            `Run ${state.appliedBy === undefined ? "the newer okengine" : `okengine ${state.appliedBy} or later`} on it.`,
        );
      return;
    }
    console.log(`oke doctor: ${db} is damaged (SQLite quick_check):`);
    for (const p of problems.slice(0, 20)) console.log(`  ${p}`);
    console.log(
      `Restore "${storeDir}" from a backup, or rescue what is readable into a new database: \`sqlite3 ${db} .recover | sqlite3 recovered.db\`, then put recovered.db in its place as store.db.`,
    );
    process.exitCode = 1;
    return;
  }
  if (!flags.salvage) {
    const r = await inspectFileLog(storeDir);
    if (r.damaged.length === 0) {
      console.log(`oke doctor: ${r.log} is intact (${r.records} records, ${r.size} bytes)`);
      return;
    }
    console.log(
      `oke doctor: ${r.log} is damaged; ${r.records} valid records, ${r.damaged.length} damaged range(s):`,
    );
    for (const d of r.damaged) console.log(describe(d, r.size));
    console.log(
      `Run \`oke doctor --salvage${flags.store ? ` --store ${flags.store}` : ""} ${dir}\` to keep the valid records.`,
    );
    process.exitCode = 1;
    return;
  }
  const r = await salvageFileLog(storeDir);
  if (r.sideFile === undefined) {
    console.log(`oke doctor: ${r.log} is intact (${r.records} records); nothing to salvage`);
    return;
  }
  const bytes = r.damaged.reduce((n, d) => n + d.bytes, 0);
  console.log(`oke doctor --salvage: kept ${r.records} valid records of ${r.log}`);
  console.log(`dropped ${bytes} damaged bytes in ${r.damaged.length} range(s), moved to ${r.sideFile}:`);
  for (const d of r.damaged) console.log(describe(d, r.size));
  console.log("Operations in the dropped bytes are lost; check the messages and runs they touched.");
}
