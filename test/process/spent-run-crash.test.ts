// A durable consumer whose processes are SIGKILLed through every attempt: its message and its run end the same way (real processes, one PostgreSQL).
import { fileURLToPath } from "node:url";
import pg from "pg";
import { afterAll, beforeAll, expect, it } from "vitest";
import { createPostgresStore } from "../../src/store/postgres/postgres-store.ts";
import { entryName, type Store } from "../../src/store/types.ts";
import { TEST_DATABASE_URL } from "../conformance/drivers.ts";
import { Child } from "./spawn.ts";

const SCRIPT = fileURLToPath(new URL("./spent-child.ts", import.meta.url));
const schema = `followups_spent_${process.pid}`;
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

/** Polls the store (real processes: no clock to advance) until `check` holds. */
async function until(check: () => Promise<boolean>, what: string, ms = 30_000): Promise<void> {
  for (const deadline = Date.now() + ms; !(await check());) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

beforeAll(async () => {
  store = createPostgresStore({ connectionString: TEST_DATABASE_URL, schema });
  await store.open();
});

afterAll(async () => {
  for (const c of children) if (!c.dead) await c.kill();
  await store.close();
  const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await admin.connect();
  await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).finally(() => admin.end());
});

it("both attempts' processes SIGKILLed inside the run: the next process fails the run with LEASE_EXPIRED after its undo, the message is dead with the same failure, no step runs a third time", async () => {
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
  expect({ code: last.code, message: last.message }).toEqual(run.error);
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
