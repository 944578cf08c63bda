// A process SIGKILLed while compensating: another process finishes the compensation (real processes, one PostgreSQL).
import { fileURLToPath } from "node:url";
import pg from "pg";
import { afterAll, beforeAll, expect, it } from "vitest";
import { createPostgresStore } from "../../src/store/postgres/postgres-store.ts";
import { entryName, type Store } from "../../src/store/types.ts";
import { TEST_DATABASE_URL } from "../conformance/drivers.ts";
import { Child } from "./spawn.ts";

const SCRIPT = fileURLToPath(new URL("./compensate-child.ts", import.meta.url));
const schema = `oke_comp_${process.pid}`;
const children: Child[] = [];
let store: Store;
const spawnChild = (env: Record<string, string>): Child => {
  const c = new Child(
    { DATABASE_URL: TEST_DATABASE_URL, OKE_SCHEMA: schema, OKE_LEASE_MS: "1500", ...env },
    SCRIPT,
  );
  children.push(c);
  return c;
};

beforeAll(async () => {
  store = createPostgresStore({ connectionString: TEST_DATABASE_URL, schema });
  await store.open();
});

afterAll(async () => {
  for (const c of children) if (c.proc.exitCode === null) await c.kill();
  await store.close();
  const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await admin.connect();
  await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).finally(() => admin.end());
});

it("a process killed during compensation: the run stays compensating, another process finishes it, then failed", async () => {
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
  for (const deadline = Date.now() + 30_000; (await store.getRun(run!.id))?.status !== "failed";) {
    if (Date.now() > deadline) throw new Error("the run never became failed");
    await new Promise((r) => setTimeout(r, 50));
  }
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
