/** /_/ready follows the store: 503 store_unavailable while PostgreSQL is cut off (through a TCP proxy), 200 once it is back. */
import { describe, expect, it } from "vitest";
import { createApp, flow, on, signal } from "../../src/index.ts";
import { createLogger } from "../../src/log/logger.ts";
import { until } from "../conformance/app-fixture.ts";
import { dropSchemaAfterAll, proxiedStore } from "./fleet.ts";

const schema = `oke_ready_${process.pid}`;

dropSchemaAfterAll(schema);

const sample = async (app: { request(p: string): Promise<Response> }, path: string) => {
  const res = await app.request(path);
  return { status: res.status, body: (await res.json()) as { reason?: string } };
};

describe("readiness during a PostgreSQL outage", () => {
  it("answers 503 store_unavailable while the store cannot commit, 200 again after; /_/health stays 200", async () => {
    const { proxy, store } = await proxiedStore(schema, { pollIntervalMs: 500 });
    const jobs = signal.once("ready.jobs");
    const done: number[] = [];
    const w = on(jobs, flow("ready.jobs", { do: ({ n }: { n: number }) => void done.push(n) }));
    const app = createApp({
      modules: [{ w }],
      env: "test",
      store,
      logger: createLogger({ format: "silent" }),
    });
    try {
      await app.boot();
      await app.emit(jobs, { n: 1 });
      await until(() => done.includes(1), "delivered before the outage", 20_000);
      expect(await sample(app, "/_/ready")).toMatchObject({ status: 200 });

      await proxy.cut();
      const cutAt = Date.now();
      // Nothing is emitted yet: the idle worker's poll-tick claim is what finds the database gone.
      await until(async () => (await sample(app, "/_/ready")).status === 503, "503 after the cut", 20_000);
      const noticedMs = Date.now() - cutAt;
      const err = await app.emit(jobs, { n: 2 }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err, "an emit during the outage fails").toBeInstanceOf(Error);
      const during = [];
      for (let i = 0; i < 10; i++) {
        during.push(await sample(app, "/_/ready"));
        expect((await sample(app, "/_/health")).status).toBe(200);
        await new Promise((r) => setImmediate(r));
      }
      expect(during.every((s) => s.status === 503 && s.body.reason === "store_unavailable")).toBe(true);

      await proxy.restore();
      const restoredAt = Date.now();
      await until(
        async () => (await sample(app, "/_/ready")).status === 200,
        "200 after the restore",
        20_000,
      );
      const backMs = Date.now() - restoredAt;
      await app.emit(jobs, { n: 3 });
      await until(() => done.includes(3), "delivered after the outage", 20_000);
      console.log(
        `readiness outage: 503 ${noticedMs} ms after the cut (idle, 500 ms poll), 10/10 samples 503 store_unavailable, 200 ${backMs} ms after the restore`,
      );
    } finally {
      await app.stop({ timeoutMs: 2_000 });
      await store.close();
      await proxy.close();
    }
  });
});
