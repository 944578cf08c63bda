// The file driver opens a `.oke` of the old format (journal.json + journal.log, written by the memory-engine driver) by importing it once.
import { cp, mkdtemp, readFile, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { createFileStore, type FileStore } from "./file-store.ts";

const FIXTURE = fileURLToPath(new URL("./fixtures/legacy-v1/", import.meta.url));
const dirs: string[] = [];
const opened: FileStore[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((s) => s.close()));
  await Promise.all(dirs.splice(0).map((d) => rm(d, { recursive: true, force: true })));
});

/** A copy of the fixture's two old files in a fresh `.oke`. */
async function oldDir(): Promise<string> {
  const dir = join(await mkdtemp(join(tmpdir(), "oke-legacy-")), ".oke");
  dirs.push(dir);
  await cp(join(FIXTURE, "journal.json"), join(dir, "journal.json"));
  await cp(join(FIXTURE, "journal.log"), join(dir, "journal.log"));
  return dir;
}

/** oldDir() with journal.json's runs changed first (a state a later version of the old driver wrote). */
async function oldDirWith(change: (runs: Record<string, unknown>[]) => void): Promise<string> {
  const dir = await oldDir();
  const file = JSON.parse(await readFile(join(dir, "journal.json"), "utf8")) as {
    state: { runs: Record<string, unknown>[] };
  };
  change(file.state.runs);
  await writeFile(join(dir, "journal.json"), JSON.stringify(file));
  return dir;
}

const logged = () => {
  const info: string[] = [];
  const logger = { info: (_o: unknown, m: string) => info.push(m), warn: () => undefined };
  return { info, logger };
};

async function openStore(dir: string, logger?: { info: (o: unknown, m: string) => void; warn: () => void }) {
  const s = createFileStore({ dir, ...(logger ? { logger: logger as never } : {}) });
  await s.open();
  opened.push(s);
  return s;
}

interface Expected {
  messages: unknown[];
  runs: unknown[];
  journals: unknown[];
  schedules: unknown[];
  instances: unknown[];
  audit: unknown[];
  idempotency: unknown;
  tape: unknown[];
  tapeHead: number;
}

async function answers(s: FileStore): Promise<Expected> {
  return {
    messages: await Promise.all(
      ["p1", "k1", "k2", "k3", "d1", "x1", "e1", "p2"].map((id) => s.getMessage(id)),
    ),
    runs: await Promise.all(["r-sleep", "r-done", "r-live"].map((id) => s.getRun(id))),
    journals: await Promise.all(["r-sleep", "r-done", "r-live"].map((id) => s.getJournal(id))),
    schedules: await s.listSchedules(),
    instances: await s.listInstances(0),
    audit: (await s.pageAudit({ limit: 10 })).items,
    idempotency: await s.getIdempotencyKey("idem-1"),
    tape: await s.readTape({ signal: "live.t", key: "room", after: 0, notBefore: 0, limit: 10 }),
    tapeHead: await s.tapeHead("live.t", "room"),
  };
}

const T0 = 1_700_000_000_000;

describe("file store: importing the old format", () => {
  it("answers exactly as the old driver did for the same directory, says so in the log, and keeps the old files", async () => {
    const dir = await oldDir();
    const expected = JSON.parse(await readFile(join(FIXTURE, "expected.json"), "utf8")) as Expected;
    // The old driver counted no recoveries (RunRecord.recoveries came later): an imported run has none.
    expected.runs = expected.runs.map((r) => ({ ...(r as object), recoveries: 0 }));
    const { info, logger } = logged();
    const s = await openStore(dir, logger);
    expect(await answers(s)).toEqual(expected);
    expect(s.diagnostics().imported).toEqual({ runs: 3, messages: 8, replayed: 6 });
    expect(info).toEqual([
      "file store: imported the old journal.json/journal.log (3 runs, 8 messages) into store.db; the old files are kept as *.imported",
    ]);
    expect((await readdir(dir)).sort()).toEqual(
      expect.arrayContaining(["journal.json.imported", "journal.log.imported", "store.db"]),
    );
    expect(await readdir(dir)).not.toContain("journal.json");
    expect(await readdir(dir)).not.toContain("journal.log");
    expect(await readFile(join(dir, "journal.log.imported"))).toEqual(
      await readFile(join(FIXTURE, "journal.log")),
    );
  });

  it("the imported state works on: per-key order, leases, due sleepers and emit order continue", async () => {
    const s = await openStore(await oldDir());
    // k1 of key "ka" is inflight (leased until T0+60 001), so its successors wait; p2 is claimable.
    expect(
      await s.claim({ signal: "sig.c", worker: "n", max: 5, now: T0 + 20, leaseMs: 1000 }),
    ).toMatchObject([{ id: "p2" }]);
    expect(await s.claim({ signal: "sig.a", worker: "n", max: 5, now: T0 + 20, leaseMs: 1000 })).toEqual([]);
    // Once the old lease lapses: the expired p1 and k1 first, k2/k3 still behind k1.
    const later = await s.claim({ signal: "sig.a", worker: "n", max: 5, now: T0 + 70_000, leaseMs: 1000 });
    expect(later.map((c) => c.id).sort()).toEqual(["k1", "p1"]);
    expect(await s.nextWakeAt({ flows: ["f.sleepy"] })).toBe(T0 + 10 + 5000); // r-live's lease expiry
    const due = await s.claimDueRuns({ owner: "n", now: T0 + 3_600_000, max: 10, leaseMs: 1000 });
    expect(due.map((d) => d.run.id).sort()).toEqual(["r-live", "r-sleep"]);
    expect(due.find((d) => d.run.id === "r-sleep")!.entries.map((e) => e.seq)).toEqual([0, 1]);
    // New messages sort after every imported one.
    await s.enqueue([{ id: "new", signal: "sig.a", key: "ka", payload: 1, parentRunId: null }], T0 + 80_000);
    const { items } = await s.pageMessages({ signal: "sig.a", status: "pending", limit: 10 });
    expect(items.map((m) => m.id)).toEqual(["k2", "k3", "new"]);
    const more = await s.appendTape(
      [{ signal: "live.t", key: "room", id: "t3", payload: null }],
      T0 + 90_000,
    );
    const head = (JSON.parse(await readFile(join(FIXTURE, "expected.json"), "utf8")) as Expected).tapeHead;
    expect(more[0]!.position).toBeGreaterThan(head);
  });

  it("a reserved sleeper stays reserved and a run's recoveries come across (the engines' rules, not an older copy)", async () => {
    const wake = T0 + 3_600_000; // r-sleep's wakeAt in the fixture
    const dir = await oldDirWith((runs) => {
      const r = runs.find((x) => x.id === "r-sleep")!;
      // Claimed ahead of its wake by o-res (claimDueRuns with sleepersDueBy): still sleeping, leased.
      Object.assign(r, { leaseOwner: "o-res", leaseExpiresAt: wake + 30_000, recoveries: 2 });
    });
    const s = await openStore(dir);
    expect(await s.getRun("r-sleep")).toMatchObject({
      status: "sleeping",
      leaseOwner: "o-res",
      leaseExpiresAt: wake + 30_000,
      wakeAt: wake,
      recoveries: 2,
    });
    // Past its wake but inside the reservation: due to nobody else (its deadline is the later of the two).
    const early = await s.claimDueRuns({ owner: "n", now: wake + 1, max: 10, leaseMs: 1000 });
    expect(early.map((d) => d.run.id)).toEqual(["r-live"]);
    // Once the reservation lapsed too, another owner takes it.
    const late = await s.claimDueRuns({ owner: "n", now: wake + 30_001, max: 10, leaseMs: 1000 });
    expect(late.map((d) => d.run.id)).toContain("r-sleep");
  });

  it("imports once: a reopen reads store.db alone, and old files that reappear after the import are not read again", async () => {
    const dir = await oldDir();
    const a = await openStore(dir);
    await a.enqueue(
      [{ id: "after-import", signal: "sig.a", key: null, payload: 1, parentRunId: null }],
      T0 + 100,
    );
    await a.close();
    // As if the process died between the import's commit and its renames: the old files are back.
    await cp(join(FIXTURE, "journal.json"), join(dir, "journal.json"));
    await cp(join(FIXTURE, "journal.log"), join(dir, "journal.log"));
    const { info, logger } = logged();
    const b = await openStore(dir, logger);
    expect(b.diagnostics().imported).toBeNull();
    expect(info).toEqual([]);
    expect(await b.getMessage("after-import")).toBeDefined();
    expect((await b.listRuns({})).map((r) => r.id).sort()).toEqual(["r-done", "r-live", "r-sleep"]);
    expect(await readdir(dir)).not.toContain("journal.json");
  });
});
