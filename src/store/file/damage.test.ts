/** Mid-log damage of an old-format journal.log: the import refuses and leaves the file untouched; `oke doctor --salvage` keeps every valid frame. */
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterEach, describe, expect, it } from "vitest";
import { OkeError } from "../../errors.ts";
import { createFileStore, type FileStore } from "./file-store.ts";
import { decodeFrames, encodeFrame } from "./frame.ts";
import { LOG_FILE, logHeader } from "./recovery.ts";

const BIN = fileURLToPath(new URL("../../../bin/oke.js", import.meta.url));
const run = promisify(execFile);
const T0 = 1_700_000_000_000;
const N = 400;
const dirs: string[] = [];
afterEach(async () => {
  while (dirs.length > 0) await rm(dirs.pop()!, { recursive: true, force: true });
});

const sha = (b: Buffer): string => createHash("sha256").update(b).digest("hex");
const store = (dir: string): FileStore => createFileStore({ dir });

/**
 * A project dir whose `.oke` is of the old format with N acknowledged emits in
 * journal.log (no snapshot): the header frame and one enqueue frame per emit,
 * as the memory-engine driver wrote them (same frame encoder).
 */
async function withEmits(): Promise<{ project: string; dir: string; log: string }> {
  const project = await mkdtemp(join(tmpdir(), "oke-damage-"));
  dirs.push(project);
  const dir = join(project, ".oke");
  await mkdir(dir);
  const frames = [logHeader(0)];
  for (let i = 0; i < N; i++) {
    const m = {
      id: `m${String(i).padStart(4, "0")}`,
      signal: "sig.a",
      key: null,
      payload: { i },
      parentRunId: null,
    };
    frames.push(encodeFrame({ op: "enqueue", messages: [m], now: T0 + i }));
  }
  await writeFile(join(dir, LOG_FILE), Buffer.concat(frames));
  return { project, dir, log: join(dir, LOG_FILE) };
}

/** Flips one byte at `fraction` of the file; returns its offset. */
async function flip(log: string, fraction: number): Promise<number> {
  const buf = await readFile(log);
  const at = Math.floor(buf.length * fraction);
  buf[at]! ^= 0x5a;
  await writeFile(log, buf);
  return at;
}

const messagesIn = async (dir: string): Promise<string[]> => {
  const s = store(dir);
  await s.open();
  try {
    const found: string[] = [];
    for (let i = 0; i < N; i++) {
      const id = `m${String(i).padStart(4, "0")}`;
      if (await s.getMessage(id)) found.push(id);
    }
    return found;
  } finally {
    await s.close();
  }
};

describe("file store: damage in the middle of an old-format journal.log", () => {
  for (const fraction of [0.1, 0.5]) {
    it(`a byte flipped at ${fraction * 100} %: the import refuses naming the file and offset, the file is unchanged; salvage keeps every valid frame, which then imports`, async () => {
      const { project, dir, log } = await withEmits();
      const flipped = await flip(log, fraction);
      const damaged = await readFile(log);
      const err = await store(dir)
        .open()
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      expect(err).toBeInstanceOf(OkeError);
      expect((err as OkeError).code).toBe("OKE1324");
      const offset = (err as OkeError & { details: { offset: number } }).details.offset;
      // The damaged frame starts at or before the flipped byte, at most one frame (~140 bytes) earlier.
      expect(offset).toBeLessThanOrEqual(flipped);
      expect(flipped - offset).toBeLessThan(200);
      expect((err as OkeError).message).toContain(`${log} is damaged at byte ${offset} of ${damaged.length}`);
      expect(sha(await readFile(log)), "journal.log unchanged").toBe(sha(damaged));

      // `oke doctor` only reports; `oke doctor --salvage` repairs.
      const check = await run(process.execPath, [BIN, "doctor", project]).then(
        () => undefined,
        (e: { code: number; stdout: string }) => e,
      );
      expect(check?.code).toBe(1);
      expect(check?.stdout).toContain(`${log} is damaged; ${N - 1} valid records, 1 damaged range(s):`);
      expect(sha(await readFile(log))).toBe(sha(damaged));

      const { stdout } = await run(process.execPath, [BIN, "doctor", "--salvage", project]);
      expect(stdout).toContain(`kept ${N - 1} valid records of ${log}`);
      const side = (await readdir(dir)).find((f) => f.startsWith(`${LOG_FILE}.damaged-`));
      expect(side, "side file next to the log").toBeDefined();
      expect(stdout).toContain(join(dir, side!));
      const moved = await readFile(join(dir, side!));
      const salvaged = await readFile(log);
      // Not a byte lost: the valid frames plus the side file are the damaged log.
      expect(salvaged.length + moved.length).toBe(damaged.length);
      expect(Buffer.concat([salvaged.subarray(0, offset), moved, salvaged.subarray(offset)])).toEqual(
        damaged,
      );
      expect(decodeFrames(salvaged).stop).toBe("end");
      expect(decodeFrames(salvaged).records).toHaveLength(N); // header + N - 1 records
      const kept = await messagesIn(dir);
      expect(kept).toHaveLength(N - 1);
      console.log(
        `damage at ${fraction * 100} %: byte ${flipped} flipped, refused at frame ${offset}; salvage kept ${kept.length}/${N}, moved ${moved.length} bytes`,
      );
    });
  }

  it("a genuinely torn tail (an incomplete last frame) still imports: every complete record survives", async () => {
    const { dir, log } = await withEmits();
    const buf = await readFile(log);
    await writeFile(log, buf.subarray(0, buf.length - 7));
    expect(await messagesIn(dir)).toHaveLength(N - 1);
    // Imported once: the cut log is kept beside store.db under its new name, and not read again.
    const after = await readFile(`${log}.imported`);
    expect(decodeFrames(after).stop).toBe("end");
    expect(await messagesIn(dir)).toHaveLength(N - 1);
  });
});

describe("oke doctor on a store in store.db", () => {
  it("says it is intact, and reports damage to the database file with exit code 1", async () => {
    const project = await mkdtemp(join(tmpdir(), "oke-doctor-db-"));
    dirs.push(project);
    const dir = join(project, ".oke");
    const s = store(dir);
    await s.open();
    for (let i = 0; i < 200; i++)
      await s.enqueue(
        [{ id: `d${i}`, signal: "sig.a", key: null, payload: { pad: "p".repeat(300) }, parentRunId: null }],
        T0,
      );
    await s.close();
    const ok = await run(process.execPath, [BIN, "doctor", project]);
    expect(ok.stdout).toContain(`${join(dir, "store.db")} is intact (SQLite quick_check)`);
    // Garbage over a page in the middle of the file (not its header): the b-tree no longer checks out.
    const db = join(dir, "store.db");
    const buf = await readFile(db);
    buf.fill(0x5a, 4096 * 3, 4096 * 4);
    await writeFile(db, buf);
    const bad = await run(process.execPath, [BIN, "doctor", project]).then(
      () => undefined,
      (e: { code: number; stdout: string }) => e,
    );
    expect(bad?.code).toBe(1);
    expect(bad?.stdout).toContain(`${db} is damaged (SQLite quick_check):`);
  });
});
