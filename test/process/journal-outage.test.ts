/** A PostgreSQL blip during a durable run: the fenced journal append is retried until it commits; the run completes, each step once. */
import { describe, expect, it } from "vitest";
import { createApp, flow } from "../../src/index.ts";
import { entryName } from "../../src/store/types.ts";
import { dropSchemaAfterAll, proxiedStore } from "./fleet.ts";

const schema = `safety_journal_blip_${process.pid}`;

dropSchemaAfterAll(schema);

describe("journal writes during a PostgreSQL blip", () => {
  it("a step that ends while the database is cut off is journaled once it is back; no step runs twice", async () => {
    const { proxy, store, lines, logger, teardown } = await proxiedStore(schema, { poolSize: 4 });
    const ran = { a: 0, b: 0, c: 0 };
    let restored: Promise<void> | undefined;
    const trip = flow("blip.trip", {
      durable: true,
      do: async (_: unknown, fx) => {
        await fx.step("a", () => ++ran.a);
        await fx.step("b", async () => {
          ran.b++;
          // The database goes away as this step ends: its append meets a dropped pool.
          await proxy.cut();
          restored = new Promise<void>((r) => setTimeout(r, 700)).then(() => proxy.restore());
          return "b done";
        });
        return fx.step("c", () => ++ran.c);
      },
    });
    const app = createApp({ modules: [{ trip }], env: "test", store, logger });
    try {
      await app.boot();
      expect(await app.invoke(trip, {})).toBe(1);
      await restored;
      expect(ran).toEqual({ a: 1, b: 1, c: 1 });
      const [run] = await store.listRuns({ flow: "blip.trip" });
      expect(run).toMatchObject({ status: "completed", output: 1 });
      expect((await store.getJournal(run!.id)).map((e) => [e.seq, entryName(e)])).toEqual([
        [0, "a"],
        [1, "b"],
        [2, "c"],
      ]);
      const retries = lines.filter((l) => l.msg === "durable run: journal append failed; retrying");
      expect(retries.length).toBeGreaterThan(0);
      expect(retries.every((l) => l.runId === run!.id)).toBe(true);
      expect(lines.filter((l) => String(l.msg).includes("given up"))).toEqual([]);
      console.log(`journal blip: ${retries.length} append retries, run ${run!.id} completed`);
    } finally {
      await teardown(app);
    }
  }, 60_000);
});
