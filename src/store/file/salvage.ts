/** `oke doctor` for the file driver: finds damage in journal.log and, on request, salvages every valid frame. */
import { readFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { errnoCode, writeFileDurable } from "./durable-fs.ts";
import { fileStoreErrors } from "./file-errors.ts";
import { acquireLock } from "./file-lock.ts";
import { decodeFrames, nextValidFrame } from "./frame.ts";
import { LOG_FILE } from "./recovery.ts";

export interface DamagedRange {
  /** Byte offset in journal.log where the damage starts. */
  offset: number;
  bytes: number;
}

export interface LogInspection {
  /** Absolute path of journal.log. */
  log: string;
  size: number;
  /** Valid records after the header (kept by a salvage). */
  records: number;
  /** Byte ranges no valid frame covers; a last one reaching the end of the file is a torn tail. */
  damaged: DamagedRange[];
}

export interface SalvageReport extends LogInspection {
  /** Where the damaged bytes were moved (undefined when there were none). */
  sideFile: string | undefined;
}

/** Walks the log frame by frame, resynchronising on the next valid frame after each damaged stretch. */
function inspect(dir: string, log: Buffer, path: string): LogInspection & { kept: Buffer[]; cut: Buffer[] } {
  const head = decodeFrames(log, 0, 1);
  if (head.records.length === 0) throw fileStoreErrors.corrupt(dir, `${LOG_FILE} has no valid header`);
  const kept: Buffer[] = [log.subarray(0, head.end)];
  const cut: Buffer[] = [];
  const damaged: DamagedRange[] = [];
  let records = 0;
  let at = head.end;
  while (at < log.length) {
    const run = decodeFrames(log, at);
    if (run.end > at) kept.push(log.subarray(at, run.end));
    records += run.records.length;
    if (run.stop === "end") break;
    const next = nextValidFrame(log, run.end);
    const to = next === -1 ? log.length : next;
    damaged.push({ offset: run.end, bytes: to - run.end });
    cut.push(log.subarray(run.end, to));
    at = to;
  }
  return { log: path, size: log.length, records, damaged, kept, cut };
}

async function readLog(dir: string): Promise<{ path: string; buf: Buffer | undefined }> {
  const path = join(dir, LOG_FILE);
  try {
    return { path, buf: await readFile(path) };
  } catch (e) {
    if (errnoCode(e) === "ENOENT") return { path, buf: undefined };
    throw e;
  }
}

/** Reads journal.log without changing anything. */
export async function inspectFileLog(storeDir: string): Promise<LogInspection> {
  const dir = resolve(storeDir);
  const { path, buf } = await readLog(dir);
  if (buf === undefined) return { log: path, size: 0, records: 0, damaged: [] };
  const { kept: _k, cut: _c, ...report } = inspect(dir, buf, path);
  return report;
}

/**
 * Keeps every valid frame of journal.log and moves the damaged bytes to
 * `journal.log.damaged-<time>` beside it (written durably first, so no byte is
 * ever lost), then replaces the log with the valid frames. Takes the store's
 * lock: it refuses while an app has the store open.
 */
export async function salvageFileLog(storeDir: string, now = new Date()): Promise<SalvageReport> {
  const dir = resolve(storeDir);
  const lock = await acquireLock(dir, () => undefined);
  try {
    const { path, buf } = await readLog(dir);
    if (buf === undefined) return { log: path, size: 0, records: 0, damaged: [], sideFile: undefined };
    const { kept, cut, ...report } = inspect(dir, buf, path);
    if (report.damaged.length === 0) return { ...report, sideFile: undefined };
    const sideFile = `${path}.damaged-${now.toISOString().replace(/[:.]/g, "-")}`;
    await writeFileDurable(sideFile, Buffer.concat(cut));
    await writeFileDurable(path, Buffer.concat(kept));
    return { ...report, sideFile };
  } finally {
    await lock.release();
  }
}
