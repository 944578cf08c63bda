/** A live reader that arrives while its instance is cut off from PostgreSQL still hears another instance's appends once it is back. */
import { describe, expect, it } from "vitest";
import { createApp, signal } from "../../src/index.ts";
import { createLogger } from "../../src/log/logger.ts";
import type { LiveEntry } from "../../src/signal/live-runtime.ts";
import { createPostgresStore } from "../../src/store/postgres/postgres-store.ts";
import { until } from "../conformance/app-fixture.ts";
import { TEST_DATABASE_URL } from "../conformance/drivers.ts";
import { capturingLogger, dropSchemaAfterAll, proxiedStore } from "./fleet.ts";

const schema = `oke_live_listen_${process.pid}`;

dropSchemaAfterAll(schema);

describe("live tapes across a PostgreSQL blip", () => {
  it("the first reader of an instance subscribes while its database is cut off: appends made elsewhere reach it after", async () => {
    const feed = signal.live("listen.feed");
    const quiet = createLogger({ format: "silent" });
    const storeA = createPostgresStore({ connectionString: TEST_DATABASE_URL, schema });
    const a = createApp({ modules: [{ feed }], env: "test", store: storeA, logger: quiet });
    // B's poll is an hour away: only its tape LISTEN connection, retried on its own, can bring A's appends.
    const { logger, lines } = capturingLogger("info");
    const listenFailed = () => lines.filter((l) => /LISTEN for live tapes is down/.test(l.msg));
    const b = await proxiedStore(schema, { logger, pollIntervalMs: 3_600_000 });
    const appB = createApp({ modules: [{ feed }], env: "test", store: b.store, logger: quiet });
    try {
      await a.boot();
      await appB.boot();
      await a.emit(feed, { state: "before" }, { key: "o1" });

      await b.proxy.cut();
      const got: Array<LiveEntry<{ state: string }>> = [];
      appB.live(feed, { key: "o1" }, (e) => void got.push(e as LiveEntry<{ state: string }>));
      await until(() => listenFailed().length > 0, "the tape LISTEN failing to start", 20_000);
      await b.proxy.restore();

      // No local append on B, no second reader: nothing but the instance itself may bring these.
      for (const state of ["a1", "a2", "a3"]) await a.emit(feed, { state }, { key: "o1" });
      await until(() => got.length >= 4, "A's appends on B's reader", 30_000);
      await a.emit(feed, { state: "a4" }, { key: "o1" });
      await until(() => got.length >= 5, "a later append on B's reader", 30_000);

      expect(got.map((e) => e.payload.state)).toEqual(["before", "a1", "a2", "a3", "a4"]);
      expect(listenFailed(), "the outage is logged once, not per retry").toHaveLength(1);
    } finally {
      await a.stop({ timeoutMs: 5_000 });
      await storeA.close();
      await b.teardown(appB);
    }
  }, 120_000);
});
