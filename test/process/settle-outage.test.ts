/** A database blip while handlers finish: their settles are retried until they commit, so none runs again after its lease. */
import { describe, expect, it } from "vitest";
import { createApp, flow, on, signal } from "../../src/index.ts";
import { gate, until } from "../conformance/app-fixture.ts";
import { capturingLogger, dropSchemaAfterAll, proxiedStore } from "./fleet.ts";

const schema = `oke_settle_${process.pid}`;

dropSchemaAfterAll(schema);

describe("settles during a PostgreSQL blip", () => {
  it("handlers that finished while the database was cut off are settled once it is back, never run again", async () => {
    const { proxy, store } = await proxiedStore(schema);
    // Debug too: the retries after the outage's first are logged at debug.
    const { logger, lines } = capturingLogger("debug");
    const jobs = signal.once("blip.jobs");
    const release = gate();
    const runs = new Map<number, number>();
    const w = on(
      jobs,
      flow("blip.jobs", {
        do: async ({ n }: { n: number }) => {
          runs.set(n, (runs.get(n) ?? 0) + 1);
          await release.promise;
        },
      }),
    );
    const N = 40;
    const app = createApp({
      modules: [{ w }],
      env: "test",
      store,
      logger,
      config: { signals: { leaseMs: 3_000, concurrency: 64 } },
    });
    try {
      await app.boot();
      for (let n = 0; n < N; n++) await app.emit(jobs, { n }, n % 2 ? { key: `k${n % 5}` } : undefined);
      await until(() => runs.size === 20 + 5, "every unkeyed message and each key's head running", 20_000);

      await proxy.cut();
      release.open(); // they all finish while the database is unreachable
      const retried = () => lines.filter((l) => l.msg === "settle failed; retrying").length;
      await until(() => retried() >= 3, "a settle retried three times", 20_000);
      await proxy.restore();

      await until(
        async () => (await app.operator.stats("blip.jobs")).delivered === N,
        "every message delivered",
        60_000,
      );
      expect(await app.operator.stats("blip.jobs")).toMatchObject({ pending: 0, inflight: 0, dead: 0 });
      expect(
        [...runs.values()].filter((c) => c !== 1),
        "no handler ran twice",
      ).toEqual([]);
      expect(runs.size).toBe(N);
      expect(lines.filter((l) => l.msg.startsWith("settle of"))).toEqual([]);
      const retryLines = lines.filter((l) => l.msg === "settle failed; retrying");
      const retries = retryLines.length;
      // One warn for the outage (two when the first retry ran before the store marked itself down),
      // the rest at debug, and no stack on them.
      const warns = retryLines.filter((l) => l.level === 40);
      expect(warns.length).toBeGreaterThanOrEqual(1);
      expect(warns.length).toBeLessThanOrEqual(2);
      expect(retries).toBeGreaterThan(warns.length);
      console.log(
        `settle blip: ${N} messages, ${retries} settle retries logged (${warns.length} at warn), 0 re-runs`,
      );
    } finally {
      release.open();
      await app.stop({ timeoutMs: 2_000 });
      await store.close();
      await proxy.close();
    }
  });
});
