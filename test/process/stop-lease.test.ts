// A durable run whose step, or a once message whose handler, outlasts a graceful stop's deadline is taken over after its lease with no recovery or attempt counted; a SIGKILL still counts one (real processes, one PostgreSQL).
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

/**
 * SIGTERM once `child` has said `ready`: its SIGTERM handler (a graceful stop) is installed after
 * boot, and work can finish during boot; a signal before that kills it by default (exit code null).
 */
async function stopped(child: Child): Promise<number | null> {
  await child.waitFor((e) => e.event === "ready", "ready");
  return child.kill("SIGTERM");
}

/** Boots an instance with a quick step and waits until it completed run `id`; then stops it. */
async function takeOverAndComplete(id: string): Promise<{ child: Child; step: { at: number } }> {
  const child = fleet.spawn({ OKE_STEP_MS: "0" });
  await waitUntil(async () => (await fleet.store.getRun(id))?.status === "completed", `run ${id} completed`);
  const step = await stepOf(child, id);
  // Its message settles right after the run: wait for it, so the stop leaves nothing behind.
  await waitUntil(async () => (await fleet.store.getMessage(id))?.status === "delivered", `message ${id}`);
  expect(await stopped(child)).toBe(0);
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

it("a once handler still running at SIGTERM's deadline: its message (retries 0) runs again after the lapse as attempt 1 and is delivered; a SIGKILL there dead-letters it", async () => {
  const id = `stop-plain-${Date.now()}`;
  const first = fleet.spawn({ OKE_PLAIN: id });
  await first.waitFor((e) => e.event === "handler" && e.id === id, `the handler of ${id}`);
  expect(await first.kill("SIGTERM")).toBe(0);
  const left = (await fleet.store.getMessage(id))!;
  expect(left).toMatchObject({ status: "inflight", attempts: 1 });
  expect(left.lockedBy).toMatch(/#stopped$/);

  const next = fleet.spawn({ OKE_STEP_MS: "0" });
  await waitUntil(
    async () => (await fleet.store.getMessage(id))?.status === "delivered",
    `message ${id} delivered`,
  );
  const ran = await next.waitFor((e) => e.event === "handler" && e.id === id, `the handler of ${id} again`);
  expect(ran).toMatchObject({ attempt: 1 });
  expect(await fleet.store.getMessage(id)).toMatchObject({ attempts: 1, failures: [] });
  expect(await stopped(next)).toBe(0);

  // The same cut made by a crash spends the attempt: dead, with the spent-claim text.
  const killed = `kill-plain-${Date.now()}`;
  const third = fleet.spawn({ OKE_PLAIN: killed });
  await third.waitFor((e) => e.event === "handler" && e.id === killed, `the handler of ${killed}`);
  await third.kill("SIGKILL");
  const fourth = fleet.spawn({ OKE_STEP_MS: "0" });
  await waitUntil(
    async () => (await fleet.store.getMessage(killed))?.status === "dead",
    `message ${killed} dead`,
  );
  expect(fourth.events.some((e) => e.event === "handler" && e.id === killed)).toBe(false);
  expect(await stopped(fourth)).toBe(0);
}, 60_000);
