/** The old file format's reader (journal.json + journal.log): boot recovery of the memory-engine driver, now what the legacy import loads. */
import { open, readFile, unlink } from "node:fs/promises";
import { join } from "node:path";
import { ensureDir, errnoCode, writeFileDurable } from "./durable-fs.ts";
import { fileStoreErrors } from "./file-errors.ts";
import { decodeFrames, encodeFrame, nextValidFrame, type StopReason } from "./frame.ts";

export const SNAPSHOT_FILE = "journal.json";
export const LOG_FILE = "journal.log";
const SNAPSHOT_FORMAT = "okengine/file-store";
const LOG_FORMAT = "okengine/file-log";
const VERSION = 1;

/**
 * The snapshot covers every log generation below `generation`; the log whose
 * header carries the same generation holds the operations after it. A crash
 * between writing a snapshot and starting its log leaves an older log, which
 * recovery recognises by its generation and discards instead of replaying twice.
 */
export interface SnapshotFile {
  format: typeof SNAPSHOT_FORMAT;
  version: number;
  generation: number;
  state: unknown;
}

export interface Recovered {
  /** The engine state of the snapshot, or undefined when there is none yet. */
  state: unknown;
  /** Operation records to replay on top of `state`, in order. */
  records: unknown[];
  generation: number;
  /** Size of the (possibly truncated) log. */
  logBytes: number;
  /** Size of the snapshot file, 0 when there is none. */
  snapshotBytes: number;
  /** Set when a torn or damaged tail was cut off. */
  dropped?: { bytes: number; reason: Exclude<StopReason, "end"> };
}

/** The snapshot file's text around the already-serialised state (serialised once, not twice). */
export const snapshotText = (generation: number, stateJson: string): string =>
  `{"format":"${SNAPSHOT_FORMAT}","version":${VERSION},"generation":${generation},"state":${stateJson}}`;

export const logHeader = (generation: number): Buffer =>
  encodeFrame({ format: LOG_FORMAT, version: VERSION, generation });

const readOptional = async (path: string): Promise<Buffer | undefined> => {
  try {
    return await readFile(path);
  } catch (e) {
    if (errnoCode(e) === "ENOENT") return undefined;
    throw e;
  }
};

const removeOptional = async (path: string): Promise<void> => {
  try {
    await unlink(path);
  } catch (e) {
    if (errnoCode(e) !== "ENOENT") throw e;
  }
};

const isGeneration = (v: unknown): v is number => typeof v === "number" && Number.isSafeInteger(v) && v >= 0;

function parseSnapshot(dir: string, buf: Buffer): SnapshotFile {
  let parsed: unknown;
  try {
    parsed = JSON.parse(buf.toString("utf8"));
  } catch (e) {
    throw fileStoreErrors.corrupt(dir, `${SNAPSHOT_FILE} is not valid JSON`, e);
  }
  const s = parsed as Partial<SnapshotFile> | null;
  if (s?.format !== SNAPSHOT_FORMAT || !isGeneration(s.generation)) {
    throw fileStoreErrors.corrupt(dir, `${SNAPSHOT_FILE} is not an okengine file store snapshot`);
  }
  if (s.version !== VERSION)
    throw fileStoreErrors.corrupt(dir, `${SNAPSHOT_FILE} has unsupported version ${String(s.version)}`);
  return s as SnapshotFile;
}

/** Starts an empty log of `generation` atomically (temp + rename), so it never lacks its header. */
export const writeFreshLog = (dir: string, generation: number): Promise<void> =>
  writeFileDurable(join(dir, LOG_FILE), logHeader(generation));

/**
 * Reads `<dir>` back to a state and the operations to replay. Must run under
 * the directory lock. Cuts a torn last frame off the log; refuses (OKE1324)
 * damage that valid records follow.
 */
export async function recover(dir: string): Promise<Recovered> {
  await ensureDir(dir);
  await removeOptional(join(dir, `${SNAPSHOT_FILE}.tmp`));
  await removeOptional(join(dir, `${LOG_FILE}.tmp`));

  const snapBuf = await readOptional(join(dir, SNAPSHOT_FILE));
  const snapshot = snapBuf === undefined ? undefined : parseSnapshot(dir, snapBuf);
  const generation = snapshot?.generation ?? 0;
  const base = { state: snapshot?.state, generation, snapshotBytes: snapBuf?.length ?? 0 };

  const logPath = join(dir, LOG_FILE);
  const log = await readOptional(logPath);
  if (log === undefined) {
    await writeFreshLog(dir, generation);
    return { ...base, records: [], logBytes: logHeader(generation).length };
  }

  const head = decodeFrames(log, 0, 1);
  const header = head.records[0] as { format?: unknown; version?: unknown; generation?: unknown } | undefined;
  if (header?.format !== LOG_FORMAT || !isGeneration(header.generation)) {
    throw fileStoreErrors.corrupt(dir, `${LOG_FILE} has no valid header`);
  }
  if (header.version !== VERSION)
    throw fileStoreErrors.corrupt(dir, `${LOG_FILE} has unsupported version ${String(header.version)}`);
  if (header.generation > generation) {
    throw fileStoreErrors.corrupt(
      dir,
      `${LOG_FILE} (generation ${header.generation}) is newer than ${SNAPSHOT_FILE} (generation ${generation})`,
    );
  }
  if (header.generation < generation) {
    // Crash after a compaction's snapshot, before its fresh log: the snapshot already holds all of it.
    await writeFreshLog(dir, generation);
    return { ...base, records: [], logBytes: logHeader(generation).length };
  }

  const body = decodeFrames(log, head.end);
  if (body.stop === "end") return { ...base, records: body.records, logBytes: log.length };
  // Only an incomplete last frame is a torn write. Damage with valid records after it is not
  // cut: that would throw acknowledged writes away. The file is left exactly as it is.
  const after = nextValidFrame(log, body.end);
  if (after !== -1) throw fileStoreErrors.damaged(dir, logPath, body.end, after, log.length, body.stop);
  const handle = await open(logPath, "r+");
  try {
    await handle.truncate(body.end);
    await handle.sync();
  } finally {
    await handle.close();
  }
  return {
    ...base,
    records: body.records,
    logBytes: body.end,
    dropped: { bytes: log.length - body.end, reason: body.stop },
  };
}
