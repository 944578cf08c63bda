// The `compensating` status on every driver: while undos run, and after a crash during them.
import { describe, expect, it } from "vitest";
import { createTimeTravel, flow, http, on } from "../../src/index.ts";
import { entryName, type RunStatus } from "../../src/store/types.ts";
import { appFactory, gate, until } from "./app-fixture.ts";
import { drivers } from "./drivers.ts";

const post = { method: "POST", headers: { "content-type": "application/json" }, body: "{}" };
const LEASE_MS = 30_000;

interface Probe {
  log: string[];
  /** Status of the run as each undo saw it. */
  seen: RunStatus[];
  /** Set by the body: the run the undos belong to. */
  runId?: string;
}

describe.each(drivers)("compensating on the $name driver", (driver) => {
  const apps = appFactory(driver);

  /** reserve → charge → ship (throws); the undos refund, then release. `hang` holds the release open. */
  const order = (p: Probe, statusOf: (id: string) => Promise<RunStatus | undefined>, hang?: Promise<void>) =>
    on(
      http.post("/orders"),
      flow("orders.place", {
        durable: true,
        do: async (_: unknown, fx) => {
          p.runId = fx.runId;
          const undo = async (what: string): Promise<void> => {
            p.seen.push((await statusOf(fx.runId))!);
            p.log.push(what);
          };
          await fx.step("reserve", () => (p.log.push("reserve"), "r1"), {
            undo: async (r) => {
              await undo(`release ${r}`);
              await hang;
            },
          });
          await fx.step("charge", () => (p.log.push("charge"), "c1"), { undo: (c) => undo(`refund ${c}`) });
          await fx.step("ship", () => {
            throw new Error("no stock");
          });
        },
      }),
    );

  it("while the undos run the run is compensating, then failed with the original error", async () => {
    const p: Probe = { log: [], seen: [] };
    let statusOf: (id: string) => Promise<RunStatus | undefined> = async () => undefined;
    const app = await apps.make([{ o: order(p, (id) => statusOf(id)) }]);
    statusOf = async (id) => (await app.store.getRun(id))?.status;
    expect((await app.request("/orders", post)).status).toBe(500);
    expect(p.log).toEqual(["reserve", "charge", "refund c1", "release r1"]);
    expect(p.seen).toEqual(["compensating", "compensating"]);
    const run = await app.store.getRun(p.runId!);
    expect(run).toMatchObject({ status: "failed", error: { code: "Error", message: "no stock" } });
    expect(await app.operator.runs({ status: "compensating" })).toEqual([]);
  });

  it("a run without undos fails as before", async () => {
    const f = on(
      http.post("/plain"),
      flow("orders.plain", {
        durable: true,
        do: async (_: unknown, fx) => {
          await fx.step("a", () => 1);
          throw new Error("boom");
        },
      }),
    );
    const app = await apps.make([{ f }]);
    expect((await app.request("/plain", post)).status).toBe(500);
    const [run] = await app.operator.runs({ status: "failed" });
    // The run keeps the error as the journal does (name, own fields): a caller reading it rebuilds it.
    expect(run!.error).toEqual({ code: "Error", message: "boom", detail: { name: "Error" } });
    expect((await app.operator.run(run!.id))!.journal.map((e) => e.kind)).toEqual(["step"]);
  });

  it("an instance that dies while compensating: another takes the run over and finishes the undos it had not done", async () => {
    const store = await apps.store();
    // Instance A: its clock never moves again once it hangs, so it stops renewing its lease — it is dead
    // to the fleet, like a killed process, and every write it tries later is fenced off.
    const a: Probe = { log: [], seen: [] };
    const hang = gate();
    const timeA = createTimeTravel(1_000_000);
    const appA = await apps.make(
      [{ o: order(a, async (id) => (await store.getRun(id))?.status, hang.promise) }],
      {
        store,
        time: timeA,
      },
    );
    const request = appA.request("/orders", post);
    await until(() => a.log.includes("release r1"), "A hangs in the second undo");
    expect((await store.getRun(a.runId!))!.status).toBe("compensating");

    const b: Probe = { log: [], seen: [] };
    const timeB = createTimeTravel(timeA.now());
    await apps.make([{ o: order(b, async (id) => (await store.getRun(id))?.status) }], {
      store,
      time: timeB,
    });
    // A's lease is live: B leaves the run alone.
    expect((await store.getRun(a.runId!))!.leaseOwner).not.toBeNull();
    timeB.advance(LEASE_MS + 1);
    await until(
      async () => (await store.getRun(a.runId!))?.status === "failed",
      "B finishes the compensation",
    );

    // B replayed reserve, charge and the failed ship, skipped the journaled refund and ran the release.
    expect(b.log).toEqual(["release r1"]);
    expect(b.seen).toEqual(["compensating"]);
    const journal = await store.getJournal(a.runId!);
    expect(journal.map(entryName)).toEqual(["reserve", "charge", "ship", "undo:charge", "undo:reserve"]);
    expect(await store.getRun(a.runId!)).toMatchObject({
      status: "failed",
      error: { code: "Error", message: "no stock" },
    });

    // A wakes up: its late undo entry is refused, nothing changes.
    hang.open();
    expect((await request).status).toBeGreaterThanOrEqual(400);
    expect((await store.getJournal(a.runId!)).length).toBe(5);
  });
});
