/** The file store at open ends the leases of the process that is gone (its lock proves no other uses the store): its messages and runs are claimable at once, not after up to a lease. */
import { copyFile, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { createFileStore, type FileStore } from "./file-store.ts";

const T0 = 1_700_000_000_000;
const LEASE = 30_000;
const dirs: string[] = [];
const stores: FileStore[] = [];
afterEach(async () => {
  while (stores.length > 0) await stores.pop()!.close();
  while (dirs.length > 0) await rm(dirs.pop()!, { recursive: true, force: true });
});

describe("file store: the leases of a process that is gone", () => {
  it("a store closed and opened again keeps its leases: its handlers may still run in this process", async () => {
    const project = await mkdtemp(join(tmpdir(), "oke-gone-"));
    dirs.push(project);
    const dir = join(project, ".oke");
    const first = createFileStore({ dir });
    await first.open();
    await first.enqueue([{ id: "m1", signal: "sig.a", key: null, payload: {}, parentRunId: null }], T0);
    await first.claim({ signal: "sig.a", worker: "host:1:w", max: 1, now: T0, leaseMs: LEASE });
    await first.close();
    const s = createFileStore({ dir });
    await s.open();
    stores.push(s);
    expect(
      await s.claim({ signal: "sig.a", worker: "host:1:w2", max: 1, now: T0 + 1_000, leaseMs: LEASE }),
    ).toEqual([]);
    expect(
      await s.claim({ signal: "sig.a", worker: "host:1:w2", max: 1, now: T0 + LEASE, leaseMs: LEASE }),
    ).toEqual([expect.objectContaining({ id: "m1", attempts: 2 })]);
  });

  it("a message in flight and a running run of a killed process are claimable at the next open, as the next attempt and a recovery; the open says so", async () => {
    const project = await mkdtemp(join(tmpdir(), "oke-gone-"));
    dirs.push(project);
    const live = createFileStore({ dir: join(project, "live") });
    await live.open();
    await live.enqueue([{ id: "m1", signal: "sig.a", key: null, payload: {}, parentRunId: null }], T0);
    const [claimed] = await live.claim({
      signal: "sig.a",
      worker: "host:1:w",
      max: 1,
      now: T0,
      leaseMs: LEASE,
    });
    expect(claimed).toMatchObject({ id: "m1", attempts: 1 });
    await live.startRun({
      id: "r1",
      flow: "flow.a",
      input: {},
      parentRunId: null,
      owner: "host:1:o",
      now: T0,
      leaseMs: LEASE,
    });
    // The files as a kill -9 leaves them: copied while the store is open.
    const crashed = join(project, ".oke");
    await mkdir(crashed);
    await copyFile(join(project, "live", "store.db"), join(crashed, "store.db"));
    await copyFile(join(project, "live", "store.db-wal"), join(crashed, "store.db-wal"));
    // And its lock file, naming a process that no longer holds the kernel lock (this pid, as a
    // container's restarted app often has: not a lock this process took).
    await writeFile(join(crashed, "lock"), `${process.pid}\n`);
    stores.push(live);

    const lines: Array<{ msg: string; messages?: number; runs?: number }> = [];
    const s = createFileStore({
      dir: crashed,
      logger: pino({ level: "info" }, { write: (l: string) => void lines.push(JSON.parse(l)) }),
    });
    await s.open();
    stores.push(s);
    // One second after the crash, far inside the old leases.
    const now = T0 + 1_000;
    expect(await s.claim({ signal: "sig.a", worker: "host:2:w", max: 1, now, leaseMs: LEASE })).toEqual([
      expect.objectContaining({ id: "m1", attempts: 2, lockedBy: "host:2:w" }),
    ]);
    const [taken] = await s.claimDueRuns({ owner: "host:2:o", now, leaseMs: LEASE, max: 10 });
    expect(taken?.run).toMatchObject({ id: "r1", leaseOwner: "host:2:o", recoveries: 1 });
    expect(lines.find((l) => l.msg.includes("held by a process that is gone"))).toMatchObject({
      messages: 1,
      runs: 1,
    });
  });
});
