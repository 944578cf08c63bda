// The file driver beyond the contract: recovery from its WAL, locking, group commit, counters.
import { spawn } from "node:child_process";
import { appendFile, copyFile, mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { entryName, type NewMessage, type Store } from "../types.ts";
import { createFileStore, type FileStore, type FileStoreOptions } from "./file-store.ts";
import { DB_FILE } from "./sqlite/sqlite-db.ts";

const WAL_FILE = `${DB_FILE}-wal`;
/** SQLite's WAL layout: a 32-byte file header, then frames of a 24-byte header and one page. */
const WAL_HEADER = 32;
const FRAME_HEADER = 24;

const T0 = 1_700_000_000_000;
const dirs: string[] = [];
const open: FileStore[] = [];
const tempDir = async (): Promise<string> => {
  const dir = await mkdtemp(join(tmpdir(), "oke-file-store-"));
  dirs.push(dir);
  return dir;
};
const openStore = async (dir: string, o: Omit<FileStoreOptions, "dir"> = {}): Promise<FileStore> => {
  const store = createFileStore({ dir, ...o });
  await store.open();
  open.push(store);
  return store;
};
afterEach(async () => {
  await Promise.all(open.splice(0).map((s) => s.close()));
  await Promise.all(dirs.splice(0).map((d) => rm(d, { recursive: true, force: true })));
});

const msg = (id: string, signal = "sig.a", key: string | null = null): NewMessage => ({
  id,
  signal,
  key,
  payload: { id },
  parentRunId: null,
});

/**
 * What a crash would leave: the database and its WAL as they are now, without
 * close() (which checkpoints and removes the WAL) and without the lock. A read
 * first, so no batch is waiting to commit.
 */
async function crashImage(store: FileStore): Promise<string> {
  await store.stats("any", T0);
  const to = await tempDir();
  await copyFile(join(store.dir, DB_FILE), join(to, DB_FILE));
  await copyFile(join(store.dir, WAL_FILE), join(to, WAL_FILE)).catch(() => undefined);
  return to;
}

async function sampleWorkload(store: Store): Promise<void> {
  await store.enqueue([msg("m1"), msg("m2", "sig.a", "k"), msg("m3", "sig.a", "k")], T0);
  const [c1] = await store.claim({ signal: "sig.a", worker: "w", max: 1, now: T0 + 1, leaseMs: 1000 });
  await store.settle([{ id: c1!.id, worker: "w", attempt: 1, status: "delivered" }], T0 + 2);
  await store.startRun({
    id: "r1",
    flow: "f",
    input: { x: 1 },
    parentRunId: null,
    owner: "o",
    now: T0,
    leaseMs: 1000,
  });
  await store.append({
    runId: "r1",
    owner: "o",
    now: T0 + 3,
    entries: [{ runId: "r1", seq: 0, kind: "step", name: "a", value: 7, at: T0 + 3 }],
    emits: [msg("e1", "sig.b")],
  });
  await store.park({
    runId: "r1",
    owner: "o",
    now: T0 + 4,
    entry: {
      runId: "r1",
      seq: 1,
      kind: "sleep",
      label: "nap",
      duration: "1h",
      wakeAt: T0 + 3_600_000,
      at: T0 + 4,
    },
  });
}

async function expectSampleState(store: Store): Promise<void> {
  expect(await store.getMessage("m1")).toMatchObject({ status: "delivered", attempts: 1, updatedAt: T0 + 2 });
  expect(await store.getMessage("m2")).toMatchObject({ status: "pending", key: "k" });
  expect(await store.getMessage("e1")).toMatchObject({ status: "pending", signal: "sig.b" });
  expect(await store.getRun("r1")).toMatchObject({
    status: "sleeping",
    wakeAt: T0 + 3_600_000,
    leaseOwner: null,
  });
  expect((await store.getJournal("r1")).map(entryName)).toEqual(["a", "nap"]);
  expect(await store.nextWakeAt()).toBe(T0 + 3_600_000);
}

describe("file store: recovery", () => {
  it("keeps its state across close and reopen; close folds the WAL into store.db", async () => {
    const dir = await tempDir();
    const a = await openStore(dir);
    await sampleWorkload(a);
    await a.close();
    await expect(stat(join(dir, WAL_FILE))).rejects.toMatchObject({ code: "ENOENT" });
    const b = await openStore(dir);
    await expectSampleState(b);
  });

  it("keeps every acknowledged write when the process dies without close", async () => {
    const a = await openStore(await tempDir());
    await sampleWorkload(a);
    const image = await crashImage(a);
    expect((await stat(join(image, WAL_FILE))).size).toBeGreaterThan(WAL_HEADER);
    const b = await openStore(image);
    await expectSampleState(b);
  });

  it("ignores a torn WAL tail: earlier commits intact, and the store writes on", async () => {
    const a = await openStore(await tempDir());
    await sampleWorkload(a);
    const image = await crashImage(a);
    await appendFile(join(image, WAL_FILE), Buffer.from([0x40, 0, 0, 0, 1, 2, 3]));
    const b = await openStore(image);
    await expectSampleState(b);
    await b.enqueue([msg("after")], T0 + 10);
    await b.close();
    const c = await openStore(image);
    expect(await c.getMessage("after")).toBeDefined();
    await expectSampleState(c);
  });

  it("a damaged last commit is a torn tail: the commits before it survive, it is dropped", async () => {
    const a = await openStore(await tempDir());
    await a.enqueue([msg("x1")], T0);
    await a.enqueue([msg("x2")], T0);
    const before = (await stat(join(a.dir, WAL_FILE))).size;
    await a.enqueue([msg("x3")], T0);
    const image = await crashImage(a);
    const buf = await readFile(join(image, WAL_FILE));
    expect(buf.length).toBeGreaterThan(before);
    // A byte of the last commit's first page: its frame checksum no longer matches.
    buf[before + FRAME_HEADER + 100]! ^= 0x01;
    await writeFile(join(image, WAL_FILE), buf);
    const b = await openStore(image);
    expect(await b.getMessage("x1")).toBeDefined();
    expect(await b.getMessage("x2")).toBeDefined();
    expect(await b.getMessage("x3")).toBeUndefined();
  });

  it("a directory whose store.db is not a database is refused with OKE1323, untouched", async () => {
    const dir = await tempDir();
    await writeFile(join(dir, DB_FILE), "not a database, but somebody's file".repeat(200));
    const err = await createFileStore({ dir })
      .open()
      .catch((e: unknown) => e);
    expect(err).toMatchObject({ code: "OKE1323" });
    expect((err as Error).message).toBe(
      `File store "${dir}" cannot be recovered: ${DB_FILE} is not a readable SQLite database.`,
    );
    await expect(stat(join(dir, "lock"))).rejects.toMatchObject({ code: "ENOENT" });
  });

  it("a reopened store behaves exactly like the live one (same rows, same claim order)", async () => {
    const live = await openStore(await tempDir());
    const rand = seeded(42);
    const all: string[] = [];
    let now = T0;
    for (let round = 0; round < 60; round++) {
      const batch = Array.from({ length: 5 }, (_, i) =>
        msg(`m${round}-${i}`, "sig.a", i % 2 === 0 ? `k${round % 3}` : null),
      );
      all.push(...batch.map((m) => m.id));
      await live.enqueue(batch, now);
      // One claim time for the whole batch: equal lease deadlines.
      const got = await live.claim({
        signal: "sig.a",
        worker: `w${round % 2}`,
        max: 1 + Math.floor(rand() * 6),
        now,
        leaseMs: 500,
      });
      await live.settle(
        got
          .map((c, i) => ({
            id: c.id,
            worker: c.lockedBy,
            attempt: c.attempts,
            status: (["delivered", "pending", "dead"] as const)[i % 3]!,
            failure: { code: "E", message: "no", at: now, attempt: c.attempts },
          }))
          .filter(() => rand() < 0.7),
        now,
      );
      if (round % 10 === 9) await live.replay("sig.a", "all", now);
      now += Math.floor(rand() * 400); // some leases expire and are reclaimed lazily
    }
    const reopened = await openStore(await crashImage(live));
    for (const id of all) expect(await reopened.getMessage(id), id).toEqual(await live.getMessage(id));
    // Same future: claims one at a time must match.
    for (let i = 0; i < 400; i++) {
      const req = { signal: "sig.a", worker: "z", max: 1, now: now + i * 50, leaseMs: 100 };
      const [x, y] = [await live.claim(req), await reopened.claim(req)];
      expect(y, `claim ${i}`).toEqual(x);
      if (x.length === 0) break;
      if (i % 2 === 0) {
        const s = [{ id: x[0]!.id, worker: "z", attempt: x[0]!.attempts, status: "delivered" as const }];
        expect(await reopened.settle(s, req.now)).toEqual(await live.settle(s, req.now));
      }
    }
  });
});

describe("file store: lock", () => {
  it("refuses a second store on the same directory, naming the pid and the directory", async () => {
    const dir = await tempDir();
    await openStore(dir);
    const err = await createFileStore({ dir })
      .open()
      .catch((e: unknown) => e);
    expect(err).toMatchObject({ code: "OKE1320" });
    expect((err as Error).message).toBe(
      `File store "${dir}" is locked by process ${process.pid} (this process).`,
    );
  });

  it("refuses while another process holds it, and takes it over once that process is killed", async () => {
    const dir = await tempDir();
    const child = spawn(
      process.execPath,
      ["--import", "tsx", fileURLToPath(new URL("./crash-child.ts", import.meta.url)), "hold", dir],
      {
        cwd: fileURLToPath(new URL("../../../", import.meta.url)),
        stdio: ["ignore", "pipe", "inherit"],
      },
    );
    const exited = new Promise((resolve) => child.on("exit", resolve));
    await new Promise<void>((resolve) =>
      createInterface({ input: child.stdout }).once("line", () => resolve()),
    );
    const err = await createFileStore({ dir })
      .open()
      .catch((e: unknown) => e);
    expect(err).toMatchObject({ code: "OKE1320", details: { dir, pid: child.pid } });
    expect((err as Error).message).toContain(`process ${child.pid}`);
    child.kill("SIGKILL");
    await exited;
    const warnings: string[] = [];
    await openStore(dir, {
      logger: { warn: (_o: unknown, m: string) => warnings.push(m), info: () => undefined } as never,
    });
    expect(warnings).toEqual([`file store: took over the lock of process ${child.pid}, which is gone`]);
    expect(await readFile(join(dir, "lock"), "utf8")).toBe(`${process.pid}\n`);
  });

  it("releases the lock on close, so the directory opens again", async () => {
    const dir = await tempDir();
    const a = await openStore(dir);
    await a.enqueue([msg("m")], T0);
    await a.close();
    await expect(stat(join(dir, "lock"))).rejects.toMatchObject({ code: "ENOENT" });
    const b = await openStore(dir);
    expect(await b.getMessage("m")).toBeDefined();
  });
});

describe("file store: group commit and lifecycle", () => {
  it("runs in WAL mode with synchronous=FULL (every commit fsyncs before its callers resolve)", async () => {
    const a = await openStore(await tempDir());
    expect(a.diagnostics()).toMatchObject({ journalMode: "wal", synchronous: 2 });
  });

  it("1 000 concurrent enqueues made in one turn share one commit, and all are durable", async () => {
    const a = await openStore(await tempDir());
    const before = a.diagnostics().commits;
    await Promise.all(Array.from({ length: 1000 }, (_, i) => a.enqueue([msg(`c${i}`)], T0)));
    expect(a.diagnostics().commits - before).toBe(1);
    const b = await openStore(await crashImage(a));
    expect((await b.stats("sig.a", T0)).pending).toBe(1000);
  });

  it("callers of later turns get later commits, and none is acknowledged before its commit", async () => {
    const a = await openStore(await tempDir());
    const before = a.diagnostics().commits;
    const acked: number[] = [];
    const calls: Promise<void>[] = [];
    for (let turn = 0; turn < 10; turn++) {
      const committed = a.diagnostics().commits;
      for (let i = 0; i < 100; i++) {
        const id = turn * 100 + i;
        calls.push(
          a.enqueue([msg(`s${id}`)], T0).then(() => {
            // Resolved only once a commit past the one before this turn happened.
            expect(a.diagnostics().commits).toBeGreaterThan(committed);
            acked.push(id);
          }),
        );
      }
      expect(acked.length).toBe(turn * 100); // this turn's callers are not acknowledged yet
      await new Promise<void>((r) => setImmediate(r));
    }
    await Promise.all(calls);
    expect(acked).toHaveLength(1000);
    expect(a.diagnostics().commits - before).toBe(10);
    const b = await openStore(await crashImage(a));
    expect((await b.stats("sig.a", T0)).pending).toBe(1000);
  });

  it("a read waits for the commit of the state it saw", async () => {
    const a = await openStore(await tempDir());
    const before = a.diagnostics().commits;
    const write = a.enqueue([msg("seen")], T0);
    const read = a.getMessage("seen").then((m) => {
      expect(a.diagnostics().commits).toBe(before + 1);
      return m;
    });
    expect(await read).toMatchObject({ id: "seen", status: "pending" });
    await write;
  });

  it("refuses calls before open and after close, and reopens", async () => {
    const dir = await tempDir();
    const s = createFileStore({ dir });
    await expect(s.getMessage("x")).rejects.toMatchObject({ code: "OKE1322" });
    await s.open();
    await s.open(); // idempotent
    await s.enqueue([msg("x")], T0);
    await s.close();
    await expect(s.enqueue([msg("y")], T0)).rejects.toMatchObject({ code: "OKE1322" });
    await s.open();
    open.push(s);
    expect(await s.getMessage("x")).toBeDefined();
  });

  it("announces enqueued only once the write is durable", async () => {
    const a = await openStore(await tempDir());
    const seen: number[] = [];
    a.subscribe((e) => {
      if (e.kind === "enqueued") seen.push(a.diagnostics().commits);
    });
    const before = a.diagnostics().commits;
    await a.enqueue([msg("ev")], T0);
    expect(seen).toEqual([before + 1]);
  });
});

function seeded(seed: number): () => number {
  return () => {
    seed = (seed * 1_103_515_245 + 12_345) & 0x7fffffff;
    return seed / 0x80000000;
  };
}
