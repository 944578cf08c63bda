// A process SIGKILLed inside a durable child of fx.call: after a restart the parent completes with one recovery (durable.maxRecoveries 1 holds), the child's step re-runs once (real processes, one PostgreSQL).
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, expect, it } from "vitest";
import { entryName } from "../../src/store/types.ts";
import { useFleet, waitUntil } from "./fleet.ts";

const dir = mkdtempSync(join(tmpdir(), "oke-call-crash-"));
const TRACE = join(dir, "trace.log");
const fleet = useFleet({
  schema: `call_crash_${process.pid}`,
  script: fileURLToPath(new URL("./call-crash-child.ts", import.meta.url)),
  env: { OKE_LEASE_MS: "1000", OKE_MAX_RECOVERIES: "1", OKE_TRACE: TRACE },
  store: true,
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));

it("the process dies in the child's step; the next boot's orphan scan takes parent and child, and the parent waits for the child instead of losing its attempt", async () => {
  const { store } = fleet;
  const first = fleet.spawn({ OKE_INVOKE: "1", OKE_KILL_IN_WORK: "1" });
  await first.exited;
  expect(first.proc.signalCode).toBe("SIGKILL");
  const [parent] = await store.listRuns({ flow: "calls.parent" });
  const childId = `${parent!.id}.0`;
  const child = (await store.getRun(childId))!;
  expect([parent!.status, child.status]).toEqual(["running", "running"]);
  // Both leases lapsed before the restart, so its boot's orphan scan takes both runs.
  const lapsed = Math.max(parent!.leaseExpiresAt ?? 0, child.leaseExpiresAt ?? 0);
  await waitUntil(() => Date.now() > lapsed + 50, "the dead process's leases lapse", 10_000);
  const second = fleet.spawn();
  await second.waitFor((e) => e.event === "ready", "the restarted process is ready");
  await waitUntil(
    async () => ["completed", "failed"].includes((await store.getRun(parent!.id))?.status ?? ""),
    "the parent ends",
  );
  const value = `work-${second.proc.pid}`;
  expect(await store.getRun(parent!.id)).toMatchObject({ status: "completed", output: value, recoveries: 1 });
  expect(await store.getRun(childId)).toMatchObject({ status: "completed", output: value, recoveries: 1 });
  expect((await store.getJournal(parent!.id)).map(entryName)).toEqual(["calls.child", "after"]);
  const work = readFileSync(TRACE, "utf8").trim().split("\n");
  expect(work.map((l) => l.split(" ")[2])).toEqual([String(first.proc.pid), String(second.proc.pid)]);
  await second.kill("SIGTERM");
}, 60_000);
