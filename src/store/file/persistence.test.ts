// Old-format recovery (what the legacy import reads) and the directory lock, across restarts.
import { spawn, spawnSync } from "node:child_process";
import { once } from "node:events";
import { fileURLToPath } from "node:url";
import { mkdtemp, readFile, rm, stat, truncate, writeFile, appendFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { acquireLock } from "./file-lock.ts";
import { FRAME_HEADER_BYTES, crc32, decodeFrames, encodeFrame, tableCrc32 } from "./frame.ts";
import { LOG_FILE, SNAPSHOT_FILE, logHeader, recover, snapshotText } from "./recovery.ts";

const dirs: string[] = [];
const tempDir = async (): Promise<string> => {
  const dir = await mkdtemp(join(tmpdir(), "oke-file-persist-"));
  dirs.push(dir);
  return dir;
};
afterEach(async () => {
  await Promise.all(dirs.splice(0).map((d) => rm(d, { recursive: true, force: true })));
});

/** A journal.log as the old driver wrote it: its header frame, then one frame per record. */
const writeLog = (dir: string, records: unknown[], generation = 0): Promise<void> =>
  writeFile(
    join(dir, LOG_FILE),
    Buffer.concat([logHeader(generation), ...records.map((r) => encodeFrame(r))]),
  );

describe("frames", () => {
  it("crc32 matches the table implementation and a known vector", () => {
    const data = Buffer.from("123456789");
    expect(tableCrc32(data)).toBe(0xcbf43926);
    expect(crc32(data)).toBe(0xcbf43926);
    expect(crc32(Buffer.from("ab"), crc32(Buffer.from("cd")))).toBe(
      tableCrc32(Buffer.from("ab"), tableCrc32(Buffer.from("cd"))),
    );
  });

  it("round-trips records and stops at a torn or flipped frame", () => {
    const frames = [encodeFrame({ a: 1 }), encodeFrame({ b: "é" }), encodeFrame([3])];
    const all = Buffer.concat(frames);
    expect(decodeFrames(all)).toEqual({ records: [{ a: 1 }, { b: "é" }, [3]], end: all.length, stop: "end" });
    const torn = all.subarray(0, all.length - 2);
    expect(decodeFrames(torn)).toMatchObject({ records: [{ a: 1 }, { b: "é" }], stop: "torn" });
    const flipped = Buffer.from(all);
    flipped[frames[0]!.length + FRAME_HEADER_BYTES + 2]! ^= 0x10;
    expect(decodeFrames(flipped)).toEqual({ records: [{ a: 1 }], end: frames[0]!.length, stop: "checksum" });
  });
});

describe("recovery of the old format (read by the legacy import)", () => {
  it("an empty directory is an empty state; a log replays what it holds", async () => {
    const dir = await tempDir();
    expect(await recover(dir)).toMatchObject({ state: undefined, records: [], generation: 0 });
    await writeLog(dir, [{ op: 1 }, { op: 2 }]);
    const b = await recover(dir);
    expect(b.records).toEqual([{ op: 1 }, { op: 2 }]);
    expect(b.dropped).toBeUndefined();
  });

  it("drops a torn tail and truncates the log there", async () => {
    const dir = await tempDir();
    await writeLog(dir, [{ op: 1 }, { op: 2 }]);
    const logPath = join(dir, LOG_FILE);
    const intact = (await stat(logPath)).size;
    await appendFile(logPath, encodeFrame({ op: 3 }).subarray(0, 11));
    const b = await recover(dir);
    expect(b.records).toEqual([{ op: 1 }, { op: 2 }]);
    expect(b.dropped).toEqual({ bytes: 11, reason: "torn" });
    expect((await stat(logPath)).size).toBe(intact);
  });

  it("cuts at a frame truncated mid-record and at garbage", async () => {
    const dir = await tempDir();
    await writeLog(
      dir,
      [0, 1, 2, 3, 4].map((op) => ({ op })),
    );
    const logPath = join(dir, LOG_FILE);
    const size = (await stat(logPath)).size;
    await truncate(logPath, size - 3);
    const b = await recover(dir);
    expect(b.records).toEqual([0, 1, 2, 3].map((op) => ({ op })));
    await appendFile(logPath, Buffer.from("garbage that is not a frame at all"));
    const c = await recover(dir);
    expect(c.records).toHaveLength(4);
    expect(c.dropped?.reason).toBe("checksum");
  });

  it("cuts a last record whose checksum does not match (a torn tail)", async () => {
    const dir = await tempDir();
    await writeLog(
      dir,
      [0, 1, 2].map((op) => ({ op, pad: "x".repeat(20) })),
    );
    const logPath = join(dir, LOG_FILE);
    const buf = await readFile(logPath);
    const frame = encodeFrame({ op: 0, pad: "x".repeat(20) }).length;
    const third = logHeader(0).length + 2 * frame;
    buf[third + FRAME_HEADER_BYTES + 5]! ^= 0xff;
    await writeFile(logPath, buf);
    const b = await recover(dir);
    expect(b.records).toEqual([
      { op: 0, pad: "x".repeat(20) },
      { op: 1, pad: "x".repeat(20) },
    ]);
    expect(b.dropped?.reason).toBe("checksum");
    expect((await stat(logPath)).size).toBe(third);
  });

  it("reads a snapshot plus the log of its generation", async () => {
    const dir = await tempDir();
    await writeFile(join(dir, SNAPSHOT_FILE), snapshotText(2, JSON.stringify([{ op: 0 }])));
    await writeLog(dir, [{ op: 1 }], 2);
    const b = await recover(dir);
    expect(b).toMatchObject({ state: [{ op: 0 }], records: [{ op: 1 }], generation: 2 });
  });

  it("discards a log older than the snapshot (crash between the two renames)", async () => {
    const dir = await tempDir();
    await writeLog(dir, [{ op: 1 }], 0);
    // The snapshot of generation 1 already holds op 1; the generation-0 log must not replay.
    await writeFile(join(dir, SNAPSHOT_FILE), snapshotText(1, JSON.stringify([{ op: 1 }])));
    const b = await recover(dir);
    expect(b).toMatchObject({ state: [{ op: 1 }], records: [], generation: 1 });
  });

  it("refuses a log newer than its snapshot and a damaged snapshot", async () => {
    const dir = await tempDir();
    await writeFile(join(dir, LOG_FILE), logHeader(3));
    await expect(recover(dir)).rejects.toMatchObject({ code: "OKE1323" });
    await writeFile(join(dir, SNAPSHOT_FILE), "{ not json");
    await expect(recover(dir)).rejects.toMatchObject({
      code: "OKE1323",
      message: expect.stringContaining("journal.json"),
    });
  });
});

describe("directory lock", () => {
  it("refuses a second holder, naming its pid and the directory", async () => {
    const dir = await tempDir();
    const held = await acquireLock(dir);
    await expect(acquireLock(dir)).rejects.toMatchObject({
      code: "OKE1320",
      message: expect.stringContaining(String(process.pid)),
    });
    await held.release();
    const again = await acquireLock(dir);
    await again.release();
  });

  it("refuses a lock held by another live process", async () => {
    const dir = await tempDir();
    await writeFile(join(dir, "lock"), `${process.ppid}\n`);
    const err = await acquireLock(dir).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: "OKE1320" });
    expect((err as Error).message).toContain(`process ${process.ppid}`);
    expect((err as Error).message).toContain(dir);
  });

  it("takes over a lock naming this pid that this process does not hold (pid reuse after a crash)", async () => {
    const dir = await tempDir();
    await writeFile(join(dir, "lock"), `${process.pid}\n`);
    const seen: Array<number | undefined> = [];
    const held = await acquireLock(dir, (pid) => seen.push(pid));
    expect(seen).toEqual([process.pid]);
    await expect(acquireLock(dir)).rejects.toMatchObject({ code: "OKE1320" });
    await held.release();
  });

  it("refuses a directory a live process holds even when the lock file names this pid (two containers, both pid 1), and takes it once that process is gone", async () => {
    const dir = await tempDir();
    const lockModule = fileURLToPath(new URL("./file-lock.ts", import.meta.url));
    // A real process holds the directory through acquireLock, as an app would.
    const holder = spawn(
      process.execPath,
      [
        "--import",
        "tsx",
        "--input-type=module",
        "-e",
        `const { acquireLock } = await import(${JSON.stringify(lockModule)});
         await acquireLock(${JSON.stringify(dir)});
         process.stdout.write("held\\n");
         setInterval(() => undefined, 1 << 30);`,
      ],
      { stdio: ["ignore", "pipe", "inherit"] },
    );
    try {
      const [first] = (await once(holder.stdout, "data")) as [Buffer];
      expect(first.toString()).toBe("held\n");
      // What a holder in another PID namespace looks like from here: a lock file naming our own pid.
      await writeFile(join(dir, "lock"), `${process.pid}\n`);
      await expect(acquireLock(dir)).rejects.toMatchObject({ code: "OKE1320" });
    } finally {
      holder.kill("SIGKILL");
      await once(holder, "exit");
    }
    const seen: Array<number | undefined> = [];
    const held = await acquireLock(dir, (pid) => seen.push(pid));
    expect(seen).toEqual([process.pid]);
    await held.release();
  });

  it("takes over the lock of a dead process", async () => {
    const dir = await tempDir();
    const dead = spawnSync(process.execPath, ["-e", "process.exit(0)"]).pid;
    await writeFile(join(dir, "lock"), `${dead}\n`);
    const seen: Array<number | undefined> = [];
    const held = await acquireLock(dir, (pid) => seen.push(pid));
    expect(seen).toEqual([dead]);
    expect(await readFile(join(dir, "lock"), "utf8")).toBe(`${process.pid}\n`);
    await held.release();
    await expect(stat(join(dir, "lock"))).rejects.toMatchObject({ code: "ENOENT" });
  });
});
