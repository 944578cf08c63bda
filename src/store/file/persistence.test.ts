// The file driver across restarts: what was committed is what comes back.
import { spawnSync } from "node:child_process";
import { mkdtemp, readFile, rm, stat, truncate, writeFile, appendFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { CommitLog } from "./commit-log.ts";
import { acquireLock } from "./file-lock.ts";
import { installFsyncGate } from "./fsync-gate.test-helper.ts";
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

/** A toy engine: its state is the list of applied records. */
const openLog = async (dir: string, compactBytes = 1 << 30) => {
  const rec = await recover(dir);
  const applied: unknown[] = [...((rec.state as unknown[] | undefined) ?? []), ...rec.records];
  const log = await CommitLog.open({
    dir,
    generation: rec.generation,
    bytes: rec.logBytes,
    compactBytes,
    compactRatio: 0,
    snapshotBytes: rec.snapshotBytes,
    snapshotJson: () => JSON.stringify(applied),
    wrapFailure: (e) => new Error("failed", { cause: e }),
  });
  const apply = (r: unknown): void => {
    applied.push(r);
    log.append(r);
  };
  return { rec, applied, log, apply };
};

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

describe("recovery and the commit log", () => {
  it("creates an empty store, then replays what was committed", async () => {
    const dir = await tempDir();
    const a = await openLog(dir);
    expect(a.rec).toMatchObject({ state: undefined, records: [], generation: 0 });
    a.apply({ op: 1 });
    a.apply({ op: 2 });
    await a.log.barrier();
    await a.log.close(false);
    const b = await openLog(dir);
    expect(b.rec.records).toEqual([{ op: 1 }, { op: 2 }]);
    expect(b.rec.dropped).toBeUndefined();
    await b.log.close(false);
  });

  it("drops a torn tail and truncates the log there", async () => {
    const dir = await tempDir();
    const a = await openLog(dir);
    a.apply({ op: 1 });
    a.apply({ op: 2 });
    await a.log.barrier();
    await a.log.close(false);
    const logPath = join(dir, LOG_FILE);
    const intact = (await stat(logPath)).size;
    await appendFile(logPath, encodeFrame({ op: 3 }).subarray(0, 11));
    const b = await openLog(dir);
    expect(b.rec.records).toEqual([{ op: 1 }, { op: 2 }]);
    expect(b.rec.dropped).toEqual({ bytes: 11, reason: "torn" });
    expect((await stat(logPath)).size).toBe(intact);
    // Appending after the cut continues a clean log.
    b.apply({ op: 4 });
    await b.log.barrier();
    await b.log.close(false);
    const c = await openLog(dir);
    expect(c.rec.records).toEqual([{ op: 1 }, { op: 2 }, { op: 4 }]);
    await c.log.close(false);
  });

  it("cuts at a frame truncated mid-record and at garbage", async () => {
    const dir = await tempDir();
    const a = await openLog(dir);
    for (let i = 0; i < 5; i++) a.apply({ op: i });
    await a.log.barrier();
    await a.log.close(false);
    const logPath = join(dir, LOG_FILE);
    const size = (await stat(logPath)).size;
    await truncate(logPath, size - 3);
    const b = await openLog(dir);
    expect(b.rec.records).toEqual([0, 1, 2, 3].map((op) => ({ op })));
    await b.log.close(false);
    await appendFile(logPath, Buffer.from("garbage that is not a frame at all"));
    const c = await openLog(dir);
    expect(c.rec.records).toHaveLength(4);
    expect(c.rec.dropped?.reason).toBe("checksum");
    await c.log.close(false);
  });

  it("cuts a last record whose checksum does not match (a torn tail)", async () => {
    const dir = await tempDir();
    const a = await openLog(dir);
    for (let i = 0; i < 3; i++) a.apply({ op: i, pad: "x".repeat(20) });
    await a.log.barrier();
    await a.log.close(false);
    const logPath = join(dir, LOG_FILE);
    const buf = await readFile(logPath);
    const frame = encodeFrame({ op: 0, pad: "x".repeat(20) }).length;
    const third = logHeader(0).length + 2 * frame;
    buf[third + FRAME_HEADER_BYTES + 5]! ^= 0xff;
    await writeFile(logPath, buf);
    const b = await openLog(dir);
    expect(b.rec.records).toEqual([
      { op: 0, pad: "x".repeat(20) },
      { op: 1, pad: "x".repeat(20) },
    ]);
    expect(b.rec.dropped?.reason).toBe("checksum");
    expect((await stat(logPath)).size).toBe(third);
    await b.log.close(false);
  });

  it("compacts past the threshold and recovers snapshot plus log", async () => {
    const dir = await tempDir();
    const a = await openLog(dir, 200);
    for (let i = 0; i < 40; i++) {
      a.apply({ op: i });
      if (i % 3 === 0) await a.log.barrier();
    }
    await a.log.barrier();
    expect(a.log.counters.compactions).toBeGreaterThan(1);
    await a.log.close(false);
    const b = await openLog(dir, 200);
    expect(b.rec.generation).toBe(a.log.counters.generation);
    expect(b.applied).toEqual(Array.from({ length: 40 }, (_, op) => ({ op })));
    await b.log.close(true);
    // close(true) folded the log into the snapshot.
    const c = await openLog(dir);
    expect(c.rec.records).toEqual([]);
    expect(c.applied).toHaveLength(40);
    await c.log.close(false);
  });

  it("discards a log older than the snapshot (crash between the two renames)", async () => {
    const dir = await tempDir();
    const a = await openLog(dir);
    a.apply({ op: 1 });
    await a.log.barrier();
    await a.log.close(false);
    // The snapshot of generation 1 already holds op 1; the generation-0 log must not replay.
    await writeFile(join(dir, SNAPSHOT_FILE), snapshotText(1, JSON.stringify([{ op: 1 }])));
    const b = await openLog(dir);
    expect(b.applied).toEqual([{ op: 1 }]);
    expect(b.rec.generation).toBe(1);
    await b.log.close(false);
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

  it("group-commits records appended while a flush is in flight", async () => {
    const dir = await tempDir();
    const a = await openLog(dir);
    const gate = await installFsyncGate({ hold: true });
    try {
      const waits: Promise<void>[] = [];
      a.apply({ op: 0 });
      waits.push(a.log.barrier());
      await gate.reached(); // the flush of op 0 is in its fsync, held
      for (let i = 1; i < 1000; i++) {
        a.apply({ op: i });
        waits.push(a.log.barrier());
        if (i % 100 === 0) await new Promise<void>((r) => setImmediate(r));
      }
      gate.release();
      await Promise.all(waits);
      expect(a.log.counters.records).toBe(1000);
      // op 0 alone, then the 999 appended during its fsync in one flush: counted by code, not disk speed.
      expect(gate.calls).toBe(2);
      expect(a.log.counters.fsyncs).toBe(2);
    } finally {
      gate.release();
      gate.restore();
    }
    await a.log.close(false);
    const b = await openLog(dir);
    expect(b.rec.records).toHaveLength(1000);
    await b.log.close(false);
  });
});

describe("commit log failure", () => {
  it("fails the batch and every later call once a write fails", async () => {
    const dir = await tempDir();
    const a = await openLog(dir);
    a.apply({ op: 1 });
    await a.log.barrier();
    // Pull the file out from under the log, as a dying disk would.
    await (a.log as unknown as { handle: { close(): Promise<void> } }).handle.close();
    a.apply({ op: 2 });
    await expect(a.log.barrier()).rejects.toThrow("failed");
    expect(() => a.apply({ op: 3 })).toThrow("failed");
    await a.log.close(false);
    const b = await openLog(dir);
    expect(b.rec.records).toEqual([{ op: 1 }]);
    await b.log.close(false);
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
