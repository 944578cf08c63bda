// A durable run whose step outlasts a graceful stop's deadline is taken over after its lease with no recovery; a SIGKILL still counts one (real processes, one PostgreSQL).
import { fileURLToPath } from "node:url";
import { expect, it } from "vitest";
import { useFleet, waitUntil } from "./fleet.ts";
import type { Child } from "./spawn.ts";

const fleet = useFleet({
  schema: `stop_lease_${process.pid}`,
  script: fileURLToPath(new URL("./stop-lease-child.ts", import.meta.url)),
  env: { OKE_LEASE_MS: "1000", OKE_SHUTDOWN_MS: "300" },
  store: true,
});

/** The first step event of run `id` in `child`'s output. */
const stepOf = async (child: Child, id: string): Promise<{ at: number }> =>
  (await child.waitFor((e) => e.event === "step" && e.runId === id, `the step of ${id}`)) as unknown as {
    at: number;
  };

/** `child`'s JSON log lines (stderr). */
const logOf = (child: Child): Array<{ msg: string; level: number; [k: string]: unknown }> =>
  child.stderr
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l) as { msg: string; level: number });

/** Boots an instance with a quick step and waits until it completed run `id`; then stops it. */
async function takeOverAndComplete(id: string): Promise<{ child: Child; step: { at: number } }> {
  const child = fleet.spawn({ OKE_STEP_MS: "0" });
  await waitUntil(async () => (await fleet.store.getRun(id))?.status === "completed", `run ${id} completed`);
  const step = await stepOf(child, id);
  // Its message settles right after the run: wait for it, so the stop leaves nothing behind.
  await waitUntil(async () => (await fleet.store.getMessage(id))?.status === "delivered", `message ${id}`);
  expect(await child.kill("SIGTERM")).toBe(0);
  return { child, step };
}

it("SIGTERM with the step still running past shutdownTimeoutMs: the run is left to its lease and the next instance completes it after the lapse with recoveries 0", async () => {
  const id = `stop-lease-${Date.now()}`;
  const first = fleet.spawn({ OKE_EMIT: id });
  await stepOf(first, id);
  const holder = (await fleet.store.getRun(id))!.leaseOwner!;
  expect(await first.kill("SIGTERM")).toBe(0);
  expect(first.events.some((e) => e.event === "stopped")).toBe(true);
  // The stop logged the run it left, and marked its lease as a graceful stop's: same holder, expiry kept.
  const stopLine = logOf(first).find((l) => l.msg.startsWith("okengine stopped"));
  expect(stopLine).toMatchObject({ level: 40, runIds: [id] });
  const left = (await fleet.store.getRun(id))!;
  expect(left).toMatchObject({ status: "running", leaseOwner: `${holder}#stopped`, recoveries: 0 });

  const { child, step } = await takeOverAndComplete(id);
  expect(await fleet.store.getRun(id)).toMatchObject({ status: "completed", output: "ok", recoveries: 0 });
  // Not taken before the lease the stop left had lapsed (the order of two readings, not a duration).
  expect(step.at).toBeGreaterThanOrEqual(left.leaseExpiresAt!);
  expect(logOf(child).filter((l) => l.runId === id && l.msg.includes("taken over"))).toEqual([]);
}, 60_000);

it("SIGKILL in the same step: the next instance's takeover counts one recovery and logs it at info with the run, flow, previous holder and bound", async () => {
  const id = `kill-lease-${Date.now()}`;
  const first = fleet.spawn({ OKE_EMIT: id });
  await stepOf(first, id);
  const holder = (await fleet.store.getRun(id))!.leaseOwner!;
  await first.kill("SIGKILL");

  const { child } = await takeOverAndComplete(id);
  expect(await fleet.store.getRun(id)).toMatchObject({ status: "completed", recoveries: 1 });
  const lines = logOf(child).filter((l) => l.runId === id && l.msg.includes("taken over"));
  expect(lines).toEqual([
    expect.objectContaining({
      level: 30,
      flow: "stoplease.jobs",
      previousHolder: holder,
      recoveries: 1,
      maxRecoveries: 10,
    }),
  ]);
}, 60_000);
