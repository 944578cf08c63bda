// A durable consumer whose processes are SIGKILLed through every attempt: its message and its run end the same way (real processes, one PostgreSQL).
import { fileURLToPath } from "node:url";
import { expect, it } from "vitest";
import { entryName } from "../../src/store/types.ts";
import { useFleet, waitUntil as until } from "./fleet.ts";

const fleet = useFleet({
  schema: `followups_spent_${process.pid}`,
  script: fileURLToPath(new URL("./spent-child.ts", import.meta.url)),
  env: { OKE_LEASE_MS: "1500" },
  store: true,
});
const { children } = fleet;
const spawnChild = (env: Record<string, string>) => fleet.spawn(env);

it("both attempts' processes SIGKILLed inside the run: the next process fails the run with LEASE_EXPIRED after its undo, the message is dead with the same failure, no step runs a third time", async () => {
  const { store } = fleet;
  const id = `spent-${Date.now()}`;
  // Attempt 1: charge is journaled, ship hangs; the process dies.
  const first = spawnChild({ OKE_HANG: "1", OKE_EMIT: id });
  await first.waitFor((e) => e.event === "ship" && e.id === id, "attempt 1 inside ship");
  await first.kill("SIGKILL");

  // Attempt 2 (the last): a second process takes the message (or the run first) and hangs in ship too.
  const second = spawnChild({ OKE_HANG: "1" });
  await second.waitFor((e) => e.event === "ship" && e.id === id, "the second process inside ship");
  await until(async () => ((await store.getMessage(id))?.attempts ?? 0) >= 2, "the message's last attempt");
  await second.kill("SIGKILL");
  expect(await store.getRun(id)).toMatchObject({ status: "running" });

  // A third process finds the message spent and the run's holder dead.
  const third = spawnChild({});
  await third.waitFor((e) => e.event === "ready", "the third process ready");
  await until(async () => {
    const [m, r] = await Promise.all([store.getMessage(id), store.getRun(id)]);
    return m?.status === "dead" && (r?.status === "failed" || r?.status === "completed");
  }, "message and run settled");

  const run = (await store.getRun(id))!;
  const message = (await store.getMessage(id))!;
  expect(run).toMatchObject({ status: "failed", error: { code: "LEASE_EXPIRED" }, leaseOwner: null });
  expect(run.error!.message).toContain('of "spent.jobs" did not finish within its lease');
  const last = message.failures.at(-1)!;
  // The message's failure: the run's code and message (the run's error also keeps its journal detail).
  expect({ code: last.code, message: last.message }).toEqual({
    code: run.error!.code,
    message: run.error!.message,
  });
  expect((await store.getJournal(id)).map(entryName)).toEqual(["charge", "undo:charge"]);

  const events = children.flatMap((c) => c.events).filter((e) => e.id === id);
  expect(events.filter((e) => e.event === "charge")).toHaveLength(1);
  expect(events.filter((e) => e.event === "ship")).toHaveLength(2);
  expect(events.filter((e) => e.event === "refund").map((e) => e.pid)).toEqual([third.proc.pid]);
  console.log(
    `spent run: 2 SIGKILLs inside the run; run ${run.status} ${run.error!.code}, message ${message.status} after ${message.attempts} claims; ship ran 2×, refund 1×`,
  );
  await third.kill("SIGTERM");
}, 90_000);
