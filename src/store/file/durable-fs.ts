/** fsync-safe file helpers for the file driver: durable writes, directory sync, errno codes. */
import { mkdir, open, rename, unlink } from "node:fs/promises";
import { dirname, join } from "node:path";

/** The `code` of a Node system error (ENOENT …), if it has one. */
export const errnoCode = (e: unknown): string | undefined =>
  typeof e === "object" && e !== null && "code" in e ? String(e.code) : undefined;

/**
 * Makes a rename or a file creation in `dir` durable. Linux needs the directory
 * itself fsync'd; Windows cannot open a directory for sync, and there the
 * rename is already journaled by NTFS, so that failure is ignored.
 */
export async function fsyncDir(dir: string): Promise<void> {
  let handle;
  try {
    handle = await open(dir, "r");
    await handle.sync();
  } catch (e) {
    const code = errnoCode(e);
    if (process.platform === "win32" || code === "EISDIR" || code === "EINVAL" || code === "EPERM") return;
    throw e;
  } finally {
    await handle?.close();
  }
}

/**
 * Replaces `path` atomically and durably: write `path.tmp`, fsync it, rename it
 * over `path`, fsync the directory. A crash leaves either the old or the new
 * file, never a mix (a stray `.tmp` is removed by the next open).
 */
export async function writeFileDurable(path: string, data: string | Uint8Array): Promise<void> {
  const tmp = `${path}.tmp`;
  const handle = await open(tmp, "w");
  try {
    await handle.writeFile(data);
    await handle.sync();
  } finally {
    await handle.close();
  }
  await rename(tmp, path);
  await fsyncDir(dirname(path));
}

/** Creates `dir` (and parents) if missing, durably. */
export async function ensureDir(dir: string): Promise<void> {
  const created = await mkdir(dir, { recursive: true });
  if (created !== undefined) await fsyncDir(dirname(created));
}

/** Rejects unless `dir` accepts a small durable write right now (a full disk has room again). */
export async function probeWritable(dir: string): Promise<void> {
  const path = join(dir, "write-probe.tmp");
  try {
    const handle = await open(path, "w");
    try {
      await handle.writeFile(Buffer.alloc(4096));
      await handle.sync();
    } finally {
      await handle.close();
    }
  } finally {
    await unlink(path).catch(() => undefined);
  }
}
