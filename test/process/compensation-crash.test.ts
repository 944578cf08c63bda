// A process SIGKILLed while compensating: another process finishes the compensation (real processes, one PostgreSQL).
import { fileURLToPath } from "node:url";
import { expect, it } from "vitest";
import { entryName } from "../../src/store/types.ts";
import { useFleet, waitUntil } from "./fleet.ts";

const fleet = useFleet({
  schema: `oke_comp_${process.pid}`,
  script: fileURLToPath(new URL("./compensate-child.ts", import.meta.url)),
  env: { OKE_LEASE_MS: "1500" },
  store: true,
});
const { children } = fleet;
const spawnChild = (env: Record<string, string>) => fleet.spawn(env);

it("a process killed during compensation: the run stays compensating, another process finishes it, then failed", async () => {
  const { store } = fleet;
  const id = `order-${Date.now()}`;
  const first = spawnChild({ OKE_HANG: "1", OKE_INVOKE: id });
  const release = await first.waitFor((e) => e.event === "release" && e.id === id, "the second undo started");
  expect(release.status).toBe("compensating");
  await first.kill("SIGKILL");

  const [run] = await store.listRuns({ status: "compensating" });
  expect(run).toMatchObject({ flow: "orders.place", error: { code: "Error", message: "no stock" } });
  expect((await store.getJournal(run!.id)).map(entryName)).toEqual([
    "reserve",
    "charge",
    "ship",
    "undo:charge",
  ]);

  // Its wake scheduler takes the run over once the dead process's lease lapses.
  const second = spawnChild({});
  const again = await second.waitFor((e) => e.event === "release" && e.id === id, "the release runs again");
  expect(again.status).toBe("compensating");
  await waitUntil(async () => (await store.getRun(run!.id))?.status === "failed", "the run failed");
  expect(await store.getRun(run!.id)).toMatchObject({
    status: "failed",
    error: { code: "Error", message: "no stock" },
    leaseOwner: null,
  });
  expect((await store.getJournal(run!.id)).map(entryName)).toEqual([
    "reserve",
    "charge",
    "ship",
    "undo:charge",
    "undo:reserve",
  ]);
  // Steps ran once, the refund once (journaled before the crash); only the release ran twice.
  const events = children.flatMap((c) => c.events).filter((e) => e.id === id);
  expect(events.filter((e) => e.event === "reserve")).toHaveLength(1);
  expect(events.filter((e) => e.event === "charge")).toHaveLength(1);
  expect(events.filter((e) => e.event === "refund")).toHaveLength(1);
  expect(events.filter((e) => e.event === "release")).toHaveLength(2);
  await second.kill("SIGTERM");
});
