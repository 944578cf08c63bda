/** Errors of the file driver (OKE132x). */
import { OkeError } from "../../errors.ts";

/** Errors of the file driver (OKE132x). Codes are stable; texts name the directory. */
export const fileStoreErrors = {
  locked: (dir: string, pid: number | undefined) =>
    pid === undefined
      ? new OkeError({
          code: "OKE1320",
          message: `File store "${dir}" is locked by another process.`,
          fix: "Stop the other process using this directory (another app, or a container sharing its volume), or point this app at another directory.",
          details: { dir },
        })
      : new OkeError({
          code: "OKE1320",
          message: `File store "${dir}" is locked by process ${pid}${pid === process.pid ? " (this process)" : ""}.`,
          fix: `Stop process ${pid} (in this or another container sharing the directory) or point this app at another directory. If no such process runs, delete "${dir}/lock" — never "${dir}/lock.db": its kernel lock is what keeps a second process out.`,
          details: { dir, pid },
        }),
  failed: (dir: string, cause: unknown) =>
    new OkeError({
      code: "OKE1321",
      message: `File store "${dir}" could not persist a write; it refuses calls until its disk accepts writes again.`,
      fix: "Free disk space or fix permissions: the store probes and resumes by itself, with every acknowledged write kept.",
      details: { dir },
      cause,
    }),
  noNativeBinary: (cause: unknown) =>
    new OkeError({
      code: "OKE1340",
      message:
        "The file store needs better-sqlite3's compiled binary, and this install has none: its install script did not run (npm install --ignore-scripts, or npm 12 without the script approved) or it was built for another Node.js.",
      fix: "Run `npm approve-scripts better-sqlite3 esbuild` (npm 11.x and later) and `npm rebuild better-sqlite3` (it downloads a prebuilt binary, or compiles one with python3, make and a C++ compiler); or run on PostgreSQL (DATABASE_URL), which needs no native module.",
      cause,
    }),
  closed: (dir: string) =>
    new OkeError({
      code: "OKE1322",
      message: `File store "${dir}" is not open.`,
      fix: "Call store.open() before using it, and do not use it after close().",
      details: { dir },
    }),
  removed: (dir: string, file: string) =>
    new OkeError({
      code: "OKE1325",
      message: `File store "${dir}": ${file} was removed or replaced while the app had it open; it refuses every call, and nothing written since was acknowledged.`,
      fix: `Restore "${dir}" from a backup and restart the app, or restart it to start with an empty store. Never delete the store directory under a running app.`,
      details: { dir, file },
    }),
  corrupt: (dir: string, detail: string, cause?: unknown) =>
    new OkeError({
      code: "OKE1323",
      message: `File store "${dir}" cannot be recovered: ${detail}.`,
      fix:
        `Run \`oke doctor ${dir}\` to see what is wrong. Then restore "${dir}" from a backup, or rescue what is readable ` +
        `with \`sqlite3 store.db .recover | sqlite3 recovered.db\`; moving it aside starts the app empty, without its queues and runs.`,
      details: { dir },
      cause,
    }),
  newer: (
    dir: string,
    dbVersion: number,
    codeVersion: number,
    needs: number,
    appliedBy: string | undefined,
  ) =>
    new OkeError({
      code: "OKE1326",
      message:
        `File store "${dir}" was migrated by a newer okengine: its schema is at migration ${dbVersion}` +
        `${appliedBy === undefined ? "" : ` (applied by okengine ${appliedBy})`}, and this okengine knows only ${codeVersion}. ` +
        `Nothing in it is damaged.`,
      fix:
        `Run ${appliedBy === undefined ? "the newer okengine" : `okengine ${appliedBy} or later`} on this store (its migrations after ${codeVersion} ` +
        `need code that knows migration ${needs}). To go back to this version, restore a backup of "${dir}" taken before the upgrade; do not start it empty.`,
      details: { dir, dbVersion, codeVersion, needs, ...(appliedBy === undefined ? {} : { appliedBy }) },
    }),
  walDamaged: (dir: string, offset: number, frame: number, commitsAfter: number, size: number) =>
    new OkeError({
      code: "OKE1327",
      message:
        `File store "${dir}": store.db-wal is damaged at byte ${offset} of ${size} (${frame === 0 ? "its header" : `frame ${frame}`} fails its checksum), ` +
        `and ${commitsAfter} transaction(s) committed after it follow: SQLite would drop them without a word. Nothing was opened or changed.`,
      fix:
        `Copy "${dir}" aside first. Then restore it from a backup, or run \`oke doctor --salvage ${dir}\` to keep what precedes the damage ` +
        `(the transactions after it are lost; the WAL is kept in a side file).`,
      details: { dir, file: "store.db-wal", offset, frame, commitsAfter, size },
    }),
  malformed: (dir: string, cause: unknown) =>
    new OkeError({
      code: "OKE1328",
      message: `File store "${dir}": SQLite found store.db damaged while the app used it (${cause instanceof Error ? cause.message : String(cause)}); it refuses every call until the store is repaired, and nothing written since the last acknowledged call is lost.`,
      fix: `Stop the app and run \`oke doctor ${dir}\` to see the damage; then restore "${dir}" from a backup, or rescue what is readable with \`sqlite3 store.db .recover | sqlite3 recovered.db\`.`,
      details: { dir },
      cause,
    }),
  notWritable: (dir: string, cause: unknown) =>
    new OkeError({
      code: "OKE1329",
      message: `File store "${dir}" cannot be opened for writing: ${cause instanceof Error ? cause.message : String(cause)}.`,
      fix:
        `Give this process write access to "${dir}" (it holds store.db, its WAL and a lock file), on a local, writable file system; ` +
        `or point \`file.dir\` in oke.config.ts at a directory it can write.`,
      details: {
        dir,
        ...((cause as { code?: unknown } | null)?.code === undefined
          ? {}
          : { cause: String((cause as { code?: unknown }).code) }),
      },
      cause,
    }),
  damaged: (dir: string, file: string, offset: number, nextValid: number, size: number, reason: string) =>
    new OkeError({
      code: "OKE1324",
      message:
        `File store "${dir}": ${file} is damaged at byte ${offset} of ${size} (${reason === "torn" ? "bad frame length" : reason === "json" ? "unreadable record" : "checksum mismatch"}), ` +
        `and valid records follow from byte ${nextValid}; the file was left untouched.`,
      fix: `Run \`oke doctor --salvage ${dir}\` to keep every valid record and move the damaged bytes to a side file, or restore "${dir}" from a backup.`,
      details: { dir, file, offset, nextValid, size },
    }),
} as const;
