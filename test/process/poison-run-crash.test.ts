// A poison durable run — its step SIGKILLs every process that runs it — stops after durable.maxRecoveries + 1 attempts (real processes, one PostgreSQL).
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, expect, it } from "vitest";
import { entryName } from "../../src/store/types.ts";
import { useFleet, waitUntil } from "./fleet.ts";

const MAX_RECOVERIES = 2;
const dir = mkdtempSync(join(tmpdir(), "oke-poison-"));
const TRACE = join(dir, "trace.log");
const fleet = useFleet({
  schema: `poison_run_${process.pid}`,
  script: fileURLToPath(new URL("./poison-child.ts", import.meta.url)),
  env: { OKE_LEASE_MS: "1000", OKE_MAX_RECOVERIES: String(MAX_RECOVERIES), OKE_TRACE: TRACE },
  store: true,
});
const { children } = fleet;
const spawnChild = (env: Record<string, string> = {}) => fleet.spawn(env);

/** What the step bodies and undos recorded, for one run: "charge", "boom", "refund" lines with their pids. */
const traced = (id: string): Array<{ what: string; pid: number }> =>
  readFileSync(TRACE, { encoding: "utf8", flag: "a+" })
    .split("\n")
    .filter((l) => l.split(" ")[1] === id)
    .map((l) => ({ what: l.split(" ")[0]!, pid: Number(l.split(" ")[2]) }));

/**
 * Starts app processes one after another (the first emits message `id`) until run `id` ends. Each
 * process either dies by SIGKILL inside "boom" (a takeover ran it again) or sees the run end, then
 * `onEnded` runs and it is stopped; a bound on the restarts keeps a regression from looping:
 * maxRecoveries + 1 deaths, then one that ends it.
 */
async function restartUntilEnded(
  id: string,
  env: Record<string, string>,
  onEnded: () => Promise<void> = async () => undefined,
): Promise<void> {
  for (let n = 0; n < MAX_RECOVERIES + 3; n++) {
    const child = spawnChild(n === 0 ? { ...env, OKE_EMIT: id } : env);
    const outcome = await Promise.race([
      child.exited.then(() => "died" as const),
      (async () => {
        for (;;) {
          const r = await fleet.store.getRun(id);
          if (r?.status === "failed" || r?.status === "completed") return "ended" as const;
          await new Promise((res) => setTimeout(res, 50));
          if (child.dead) return "died" as const;
        }
      })(),
    ]);
    if (outcome === "ended") {
      await onEnded();
      await child.kill("SIGTERM");
      return;
    }
    expect(child.proc.signalCode).toBe("SIGKILL");
  }
}

afterAll(() => rmSync(dir, { recursive: true, force: true }));

it("a step that SIGKILLs its process: restarted until the run fails with OKE1303 — the step ran maxRecoveries + 1 times, the undo once, the message is dead with the same failure", async () => {
  const { store } = fleet;
  const id = `poison-${Date.now()}`;
  await restartUntilEnded(id, {}, async () => {
    // The message settles after the run ends: wait for its dead letter before stopping the process.
    await waitUntil(async () => (await store.getMessage(id))?.status === "dead", "the message dead-lettered");
  });

  const run = (await store.getRun(id))!;
  expect(run).toMatchObject({
    status: "failed",
    recoveries: MAX_RECOVERIES + 1,
    leaseOwner: null,
    error: {
      code: "OKE1303",
      message: `journal: run "${id}" (poison.jobs) was recovered ${MAX_RECOVERIES + 1} times, more than durable.maxRecoveries (${MAX_RECOVERIES}); ended without running again`,
    },
  });
  expect((await store.getJournal(id)).map(entryName)).toEqual(["charge", "undo:charge"]);
  const t = traced(id);
  expect(t.filter((e) => e.what === "charge")).toHaveLength(1);
  expect(t.filter((e) => e.what === "boom")).toHaveLength(MAX_RECOVERIES + 1);
  // Each attempt of boom died with its own process; the undo ran once, in the process that ended the run.
  expect(new Set(t.filter((e) => e.what === "boom").map((e) => e.pid)).size).toBe(MAX_RECOVERIES + 1);
  expect(t.filter((e) => e.what === "refund").map((e) => e.pid)).toEqual([children.at(-1)!.proc.pid]);
  const message = (await store.getMessage(id))!;
  expect(message.status).toBe("dead");
  const last = message.failures.at(-1)!;
  // The message's failure: the run's code and message (the run's error also keeps its journal detail).
  expect({ code: last.code, message: last.message }).toEqual({
    code: run.error!.code,
    message: run.error!.message,
  });
  // The run ended at the bound, far inside the message's own budget of 21 attempts.
  expect(message.attempts).toBeLessThan(21);
  expect(children).toHaveLength(MAX_RECOVERIES + 2);
  console.log(
    `poison run: ${MAX_RECOVERIES + 1} SIGKILLs in boom over ${children.length} processes; run failed ${run.error!.code} after ${run.recoveries} recoveries, refund 1×, message dead after ${message.attempts} claims`,
  );
}, 120_000);

it("a poison step right after a sleep: every death after a wake counts, so the run fails after maxRecoveries + 1 deaths there too", async () => {
  const { store } = fleet;
  const id = `poison-nap-${Date.now()}`;
  const before = children.length;
  // The wake is reserved a little ahead on postgres; a death between the wake and the claim that
  // sets the run running used to count nothing, so the run got one death more than the bound.
  await restartUntilEnded(id, { OKE_NAP: "300ms" });

  const run = (await store.getRun(id))!;
  expect(run).toMatchObject({ status: "failed", recoveries: MAX_RECOVERIES + 1, error: { code: "OKE1303" } });
  expect((await store.getJournal(id)).map(entryName)).toEqual(["charge", "nap", "undo:charge"]);
  const t = traced(id);
  expect(t.filter((e) => e.what === "boom")).toHaveLength(MAX_RECOVERIES + 1);
  expect(t.filter((e) => e.what === "refund")).toHaveLength(1);
  expect(children.length - before).toBe(MAX_RECOVERIES + 2);
}, 120_000);
