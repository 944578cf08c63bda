// The WAL check on real SQLite WALs: intact and torn tails pass; a damaged frame with commits after it is found, and the file store refuses to open it.
import { execFile } from "node:child_process";
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  truncateSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import Database from "better-sqlite3";
import { afterEach, describe, expect, it } from "vitest";
import { OkeError } from "../../../errors.ts";
import { createFileStore } from "../file-store.ts";
import { checkWal } from "./wal-check.ts";

const BIN = fileURLToPath(new URL("../../../../bin/oke.js", import.meta.url));
const run = promisify(execFile);
const dirs: string[] = [];
afterEach(() => {
  while (dirs.length > 0) rmSync(dirs.pop()!, { recursive: true, force: true });
});

/**
 * A database in WAL mode with `txns` committed transactions still in its WAL (no checkpoint), and
 * copies of its files taken while it is open, as a kill -9 leaves them.
 */
function crashedDb(txns: number): { dir: string; db: string; wal: string } {
  const live = mkdtempSync(join(tmpdir(), "oke-wal-live-"));
  const dir = mkdtempSync(join(tmpdir(), "oke-wal-"));
  dirs.push(live, dir);
  const db = new Database(join(live, "store.db"));
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = FULL");
  db.pragma("wal_autocheckpoint = 0");
  db.exec("CREATE TABLE t (n INTEGER PRIMARY KEY, pad TEXT)");
  const insert = db.prepare("INSERT INTO t (n, pad) VALUES (?, ?)");
  for (let i = 0; i < txns; i++) insert.run(i, "x".repeat(500));
  copyFileSync(join(live, "store.db"), join(dir, "store.db"));
  copyFileSync(join(live, "store.db-wal"), join(dir, "store.db-wal"));
  db.close();
  return { dir, db: join(dir, "store.db"), wal: join(dir, "store.db-wal") };
}

/** Overwrites 4 bytes inside frame `n`'s page (1-based) of a 4 KiB-page WAL. */
function damageFrame(wal: string, n: number): void {
  const buf = readFileSync(wal);
  buf.writeUInt32BE(0xdeadbeef, 32 + (n - 1) * (24 + 4096) + 24 + 1000);
  writeFileSync(wal, buf);
}

const rowsIn = (file: string): number => {
  const db = new Database(file);
  try {
    return (db.prepare("SELECT count(*) AS n FROM t").get() as { n: number }).n;
  } finally {
    db.close();
  }
};

describe("checkWal", () => {
  it("an intact WAL: every frame valid, no damage; SQLite recovers every transaction", () => {
    const { wal, db } = crashedDb(50);
    const out = checkWal(wal)!;
    expect(out.damage).toBeUndefined();
    expect(out.validFrames).toBe((out.size - 32) / (24 + 4096));
    expect(rowsIn(db)).toBe(50);
  });

  it("a torn tail (the last transaction cut mid-frame, or its frame damaged) is not damage: it was never acknowledged", () => {
    const torn = crashedDb(50);
    truncateSync(torn.wal, checkWal(torn.wal)!.size - 2000);
    expect(checkWal(torn.wal)!.damage).toBeUndefined();
    const lastBad = crashedDb(50);
    const frames = (checkWal(lastBad.wal)!.size - 32) / (24 + 4096);
    damageFrame(lastBad.wal, frames);
    expect(checkWal(lastBad.wal)!.damage).toBeUndefined();
  });

  it("a damaged frame with transactions committed after it is found, naming the frame, its offset and what SQLite would drop", () => {
    const { wal, db } = crashedDb(50);
    damageFrame(wal, 5);
    const out = checkWal(wal)!;
    expect(out.damage).toEqual({ offset: 32 + 4 * (24 + 4096), frame: 5, commitsAfter: expect.any(Number) });
    expect(out.damage!.commitsAfter).toBeGreaterThan(1);
    // What it guards against: SQLite's own recovery keeps only what precedes the frame, silently.
    expect(rowsIn(db)).toBeLessThan(50);
  });

  it("a WAL longer than one read (1 MB): every frame checked across reads, damage in a later read found at its frame", () => {
    // One frame or more per transaction: 700 transactions are over 2.8 MB of WAL.
    const { wal, db } = crashedDb(700);
    const intact = checkWal(wal)!;
    const frames = (intact.size - 32) / (24 + 4096);
    expect(frames).toBeGreaterThan(600);
    expect(intact).toEqual({ size: intact.size, validFrames: frames });
    // A frame in the third read (frames 1-254 are the first: 1 MB holds 254 frames of 4 KiB pages).
    damageFrame(wal, 600);
    expect(checkWal(wal)!.damage).toMatchObject({ frame: 600, offset: 32 + 599 * (24 + 4096) });
    expect(checkWal(wal)!.validFrames).toBeLessThan(600);
    expect(rowsIn(db)).toBeLessThan(700);
  });

  it("a damaged header with committed frames after it is found (SQLite would ignore the whole WAL)", () => {
    const { wal } = crashedDb(20);
    const buf = readFileSync(wal);
    buf.writeUInt32BE(buf.readUInt32BE(12) + 1, 12);
    writeFileSync(wal, buf);
    expect(checkWal(wal)!.damage).toMatchObject({ offset: 0, frame: 0 });
  });

  it("no WAL, or an empty one: nothing to check", () => {
    const { dir, wal } = crashedDb(1);
    expect(checkWal(join(dir, "none-wal"))).toBeUndefined();
    writeFileSync(wal, "");
    expect(checkWal(wal)).toEqual({ size: 0, validFrames: 0 });
  });
});

describe("the file store and oke doctor on a WAL damaged mid-file", () => {
  /** A store directory as a kill -9 leaves it (files copied while the store is open), a frame halfway into its WAL damaged. */
  async function damagedStore(): Promise<{ project: string; dir: string; emitted: number; frame: number }> {
    const project = mkdtempSync(join(tmpdir(), "oke-wal-store-"));
    dirs.push(project);
    const live = join(project, "live");
    const s = createFileStore({ dir: live });
    await s.open();
    const emitted = 12;
    for (let i = 0; i < emitted; i++)
      await s.enqueue(
        [{ id: `m${i}`, signal: "sig.a", key: null, payload: { pad: "p".repeat(600) }, parentRunId: null }],
        1_700_000_000_000,
      );
    const dir = join(project, ".oke");
    mkdirSync(dir);
    copyFileSync(join(live, "store.db"), join(dir, "store.db"));
    copyFileSync(join(live, "store.db-wal"), join(dir, "store.db-wal"));
    await s.close();
    const frame = Math.floor(checkWal(join(dir, "store.db-wal"))!.validFrames / 2);
    damageFrame(join(dir, "store.db-wal"), frame);
    return { project, dir, emitted, frame };
  }

  it("the store refuses to open with OKE1327 naming the byte and frame, and changes nothing", async () => {
    const { dir, frame } = await damagedStore();
    const before = readFileSync(join(dir, "store.db-wal"));
    const err = await createFileStore({ dir })
      .open()
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(err).toBeInstanceOf(OkeError);
    const e = err as OkeError;
    expect(e.code).toBe("OKE1327");
    expect(e.message).toContain(
      `File store "${dir}": store.db-wal is damaged at byte ${32 + (frame - 1) * (24 + 4096)} of ${before.length} (frame ${frame} fails its checksum), and `,
    );
    expect(e.message).toMatch(
      /and \d+ transaction\(s\) committed after it follow: SQLite would drop them without a word/,
    );
    expect(readFileSync(join(dir, "store.db-wal"))).toEqual(before);
  });

  it("oke doctor reports it (exit 1); --salvage keeps what precedes it, the WAL in a side file, and the store opens again", async () => {
    const { project, dir, emitted, frame } = await damagedStore();
    const wal = join(dir, "store.db-wal");
    const found = await run(process.execPath, [BIN, "doctor", project]).then(
      () => undefined,
      (e: { code: number; stdout: string }) => e,
    );
    expect(found?.code).toBe(1);
    expect(found?.stdout).toContain(
      `oke doctor: ${wal} is damaged at byte ${32 + (frame - 1) * (24 + 4096)} (frame ${frame}); `,
    );
    expect(found?.stdout).toContain(`oke doctor --salvage ${project}`);
    const salvaged = await run(process.execPath, [BIN, "doctor", "--salvage", project]);
    expect(salvaged.stdout).toMatch(
      new RegExp(
        `^oke doctor --salvage: kept what .* held before byte \\d+ \\(frame ${frame}\\); the \\d+ transaction\\(s\\) committed after it are lost\\.`,
      ),
    );
    const side = readdirSync(dir).filter((f) => f.startsWith("store.db-wal.damaged-"));
    expect(side).toHaveLength(1);
    expect(salvaged.stdout).toContain(`${dir}/store.db is intact (SQLite quick_check)`);
    const s = createFileStore({ dir });
    await s.open();
    const kept = (await s.pageMessages({ signal: "sig.a", status: "pending", limit: 100 })).items.length;
    await s.close();
    expect(kept).toBeGreaterThan(0);
    expect(kept).toBeLessThan(emitted);
    expect(existsSync(join(dir, side[0]!))).toBe(true);
  });
});
