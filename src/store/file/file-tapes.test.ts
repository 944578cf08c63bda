// The file driver keeps live tapes: entries, positions and pruning survive a restart, a crash and a torn WAL tail.
import { copyFile, mkdtemp, rm, stat, truncate } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { TapeEntry } from "../fanout-types.ts";
import { createFileStore, type FileStore, type FileStoreOptions } from "./file-store.ts";
import { DB_FILE } from "./sqlite/sqlite-db.ts";

const WAL_FILE = `${DB_FILE}-wal`;

const T0 = 1_700_000_000_000;
const dirs: string[] = [];
const opened: FileStore[] = [];
const tempDir = async (): Promise<string> => {
  const dir = await mkdtemp(join(tmpdir(), "oke-file-tapes-"));
  dirs.push(dir);
  return dir;
};
const openStore = async (dir: string, o: Omit<FileStoreOptions, "dir"> = {}): Promise<FileStore> => {
  const store = createFileStore({ dir, ...o });
  await store.open();
  opened.push(store);
  return store;
};
afterEach(async () => {
  await Promise.all(opened.splice(0).map((s) => s.close()));
  await Promise.all(dirs.splice(0).map((d) => rm(d, { recursive: true, force: true })));
});

const entry = (id: string, key = "o1", signal = "orders.status") => ({ id, signal, key, payload: { id } });
const readAll = (s: FileStore, key = "o1", after = 0): Promise<TapeEntry[]> =>
  s.readTape({ signal: "orders.status", key, after, notBefore: 0, limit: 100 });

/** The files as a SIGKILL would leave them: no close() (the WAL not folded in), the lock left behind. */
async function crashImage(store: FileStore): Promise<string> {
  await store.tapeHead("orders.status", "o1");
  const to = await tempDir();
  await copyFile(join(store.dir, DB_FILE), join(to, DB_FILE));
  await copyFile(join(store.dir, WAL_FILE), join(to, WAL_FILE)).catch(() => undefined);
  return to;
}

describe("file driver: live tapes on disk", () => {
  it("entries and their positions come back after a crash (from the WAL) and after a clean close", async () => {
    const dir = await tempDir();
    const a = await openStore(dir);
    const first = await a.appendTape([entry("e1"), entry("e2"), entry("x1", "o2")], T0);
    const second = await a.appendTape([entry("e3")], T0 + 1);
    const before = await readAll(a);
    expect(before.map((e) => e.id)).toEqual(["e1", "e2", "e3"]);

    const crashed = await openStore(await crashImage(a));
    expect(await readAll(crashed)).toEqual(before);
    expect(await crashed.tapeHead("orders.status", "o1")).toBe(second[0]!.position);
    expect((await readAll(crashed, "o2")).map((e) => e.id)).toEqual(["x1"]);
    // Resume after a position seen before the crash: exactly what followed it.
    expect((await readAll(crashed, "o1", first[1]!.position)).map((e) => e.id)).toEqual(["e3"]);
    // New positions continue above every position given before.
    const next = await crashed.appendTape([entry("e4")], T0 + 2);
    expect(next[0]!.position).toBeGreaterThan(second[0]!.position);
    // A replayed durable emit (same id) is still a no-op after the restart.
    expect(await crashed.appendTape([entry("e1")], T0 + 3)).toEqual([]);

    await crashed.close();
    const snap = await openStore(crashed.dir);
    expect((await readAll(snap)).map((e) => [e.id, e.position])).toEqual(
      [...before, ...next].map((e) => [e.id, e.position]),
    );
  });

  it("a tape reader hears of an entry only once it is committed", async () => {
    const dir = await tempDir();
    const s = await openStore(dir);
    let commitsWhenHeard = -1;
    const stop = s.subscribeTapes(() => {
      commitsWhenHeard = s.diagnostics().commits;
    });
    const commits = s.diagnostics().commits;
    await s.appendTape([entry("e1")], T0);
    stop();
    expect(commitsWhenHeard).toBeGreaterThan(commits);
  });

  it("a torn tail drops only the unacknowledged append; positions never go back below an acknowledged one", async () => {
    const dir = await tempDir();
    const a = await openStore(dir);
    const kept = await a.appendTape([entry("e1"), entry("e2")], T0);
    const image = await crashImage(a);
    const size = (await stat(join(image, WAL_FILE))).size;
    await a.appendTape([entry("torn")], T0 + 1);
    // The torn append's commit, cut mid-way (a frame header and part of its page): as a
    // crash during its write would leave it.
    await copyFile(join(a.dir, WAL_FILE), join(image, WAL_FILE));
    expect((await stat(join(image, WAL_FILE))).size).toBeGreaterThan(size + 2_000);
    await truncate(join(image, WAL_FILE), size + 2_000);
    const b = await openStore(image);
    expect((await readAll(b)).map((e) => e.id)).toEqual(["e1", "e2"]);
    const after = await b.appendTape([entry("e3")], T0 + 2);
    expect(after[0]!.position).toBeGreaterThan(kept[1]!.position);
  });

  it("pruning is committed: pruned entries stay gone after a crash and after a clean close", async () => {
    const dir = await tempDir();
    const a = await openStore(dir);
    await a.appendTape([entry("old1"), entry("old2"), entry("old3", "o2")], T0);
    await a.appendTape([entry("new1")], T0 + 10_000);
    expect(await a.pruneTape("orders.status", T0 + 5_000, 2)).toBe(2);
    expect(await a.pruneTape("orders.status", T0 + 5_000, 2)).toBe(1);
    const crashed = await openStore(await crashImage(a));
    expect((await readAll(crashed)).map((e) => e.id)).toEqual(["new1"]);
    expect(await readAll(crashed, "o2")).toEqual([]);
    expect(await crashed.pruneTape("orders.status", T0 + 5_000, 10)).toBe(0);
    await a.close();
    const reopened = await openStore(dir);
    expect((await readAll(reopened)).map((e) => e.id)).toEqual(["new1"]);
  });
});
