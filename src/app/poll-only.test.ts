// Poll-only mode (no LISTEN/NOTIFY): worker pools still pick up another process's emits on their poll tick.
import { afterEach, describe, expect, it } from "vitest";
import { until } from "../../test/conformance/app-fixture.ts";
import { createApp, flow, on, signal } from "../index.ts";
import { dropSchema, freshSchema, openStore } from "../store/postgres/test-support.ts";

/**
 * Poll-only mode (`database.notify: false`, for PgBouncer transaction pooling):
 * nothing announces another process's emits, so worker pools must claim on the
 * store's poll tick.
 */
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()!();
});

describe("postgres poll-only mode", () => {
  it("a worker pool picks up another process's emit on the poll tick", async () => {
    const schema = freshSchema("poll");
    cleanups.push(() => dropSchema(schema));
    const workerStore = await openStore(schema, { notify: false, pollIntervalMs: 50 });
    cleanups.push(() => workerStore.close());
    // The other process: its own store on the same schema, no NOTIFY either.
    const producer = await openStore(schema, { notify: false, pollIntervalMs: 3_600_000 });
    cleanups.push(() => producer.close());

    const jobs = signal.once<{ n: number }>("poll.jobs");
    const seen: number[] = [];
    const worker = on(jobs, flow("poll.worker", { do: ({ n }: { n: number }) => void seen.push(n) }));
    const app = createApp({ modules: [{ exports: { jobs, worker } }], env: "test", store: workerStore });
    cleanups.push(() => app.stop({ timeoutMs: 1_000 }));
    await app.boot();
    await until(() => app.readiness().ready, "app ready");

    await producer.enqueue(
      [{ id: "p1", signal: "poll.jobs", key: null, payload: { n: 1 }, parentRunId: null }],
      1,
    );
    await until(() => seen.length === 1, "the poll tick to deliver p1");
    expect(seen).toEqual([1]);
    await until(async () => (await workerStore.getMessage("p1"))?.status === "delivered", "p1 delivered");
  });
});
