// Sleeps journaled before the entry said `label` (it said `name`) still read back and replay.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { createApp } from "../../src/app/app.ts";
import { createTimeTravel } from "../../src/clock/time-travel.ts";
import { flow, on, signal } from "../../src/index.ts";
import { createFileStore } from "../../src/store/file/file-store.ts";
import { createPostgresStore } from "../../src/store/postgres/postgres-store.ts";
import type { SleepEntry, Store } from "../../src/store/types.ts";
import { until } from "./app-fixture.ts";
import { TEST_DATABASE_URL } from "./drivers.ts";

const T0 = 1_000_000;
const HOUR = 3_600_000;
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()!();
});

/** Run "r1" of flow "naps.nap": step "before" done, then parked on sleep "nap", as an older version wrote it. */
async function writeOldRun(store: Store, park: (entry: SleepEntry) => Promise<void>): Promise<void> {
  await store.startRun({
    id: "r1",
    flow: "naps.nap",
    input: {},
    parentRunId: null,
    owner: "old",
    now: T0,
    leaseMs: 30_000,
  });
  await store.append({
    runId: "r1",
    owner: "old",
    now: T0,
    entries: [{ runId: "r1", seq: 0, kind: "step", name: "before", value: 1, at: T0 }],
  });
  await park({ runId: "r1", seq: 1, kind: "sleep", label: "nap", duration: "1h", wakeAt: T0 + HOUR, at: T0 });
}

/** Boots the current code on `store` and lets the sleep come due: the run finishes without redoing "before". */
async function replays(store: Store): Promise<void> {
  const ran: string[] = [];
  const kick = signal.once("naps.kick", { optional: true });
  const nap = on(
    kick,
    flow("naps.nap", {
      durable: true,
      do: async (_: unknown, fx) => {
        await fx.step("before", () => ran.push("before"));
        await fx.clock.sleep("nap", "1h");
        await fx.step("after", () => ran.push("after"));
      },
    }),
  );
  const time = createTimeTravel(T0 + 1);
  const app = createApp({ modules: [{ nap }], env: "test", clock: time, store });
  cleanups.push(() => app.stop({ timeoutMs: 2_000 }));
  await app.boot();
  const journal = (await app.operator.run("r1"))!.journal;
  expect(journal[1]).toEqual({
    runId: "r1",
    seq: 1,
    kind: "sleep",
    label: "nap",
    duration: "1h",
    wakeAt: T0 + HOUR,
    at: T0,
  });
  expect(await app.operator.sleepers()).toEqual([
    { runId: "r1", flow: "naps.nap", wakeAt: T0 + HOUR, label: "nap" },
  ]);
  time.advance("1h");
  await until(async () => (await app.operator.run("r1"))!.run.status === "completed", "resumed");
  expect(ran).toEqual(["after"]);
}

describe("sleep entries journaled as { name } by older versions", () => {
  it("file: a log whose sleep says name reopens with label and replays", async () => {
    const dir = mkdtempSync(join(tmpdir(), "oke-label-"));
    cleanups.push(async () => rmSync(dir, { recursive: true, force: true }));
    const old = createFileStore({ dir });
    await old.open();
    // The log records the request as given: this is exactly what an older version wrote.
    await writeOldRun(old, async ({ label, ...rest }) => {
      const legacy = { ...rest, name: label } as unknown as SleepEntry;
      await old.park({ runId: "r1", owner: "old", now: T0, entry: legacy });
    });
    await old.close();
    const store = createFileStore({ dir });
    cleanups.push(() => store.close());
    await replays(store);
  });

  it("postgres: rows keep the label in the name column, so rows of older versions read and replay", async () => {
    const schema = `oke_label_${process.pid}_${Date.now().toString(36)}`;
    const store = createPostgresStore({ connectionString: TEST_DATABASE_URL, schema });
    cleanups.push(async () => {
      const c = new pg.Client({ connectionString: TEST_DATABASE_URL });
      await c.connect();
      await c.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).finally(() => c.end());
    });
    cleanups.push(() => store.close());
    await store.open();
    await writeOldRun(store, async (e) => {
      // The statements of the 0001 schema, as older versions ran them.
      const c = new pg.Client({ connectionString: TEST_DATABASE_URL });
      await c.connect();
      try {
        await c.query(
          `INSERT INTO "${schema}".journal_entries (run_id, seq, kind, name, value, error, duration, wake_at, at)
           VALUES ($1, $2, 'sleep', $3, NULL, NULL, $4, $5, $6)`,
          [e.runId, e.seq, e.label, e.duration, e.wakeAt, e.at],
        );
        await c.query(
          `UPDATE "${schema}".runs SET status = 'sleeping', wake_at = $2, lease_owner = NULL, lease_expires_at = NULL WHERE id = $1`,
          [e.runId, e.wakeAt],
        );
      } finally {
        await c.end();
      }
    });
    await replays(store);
  });
});
