// The Console API's terminate over HTTP: an operator ends a durable run no one holds (OKE1339), refusals, audit.
import { afterEach, describe, expect, it } from "vitest";
import { createApp } from "../app/app.ts";
import type { App } from "../app/types.ts";
import { createTimeTravel, type TimeTravel } from "../clock/time-travel.ts";
import { flow, on, signal } from "../index.ts";
import { drivers } from "../../test/conformance/drivers.ts";
import { until } from "../../test/conformance/app-fixture.ts";
import type { Store } from "../store/types.ts";
import { JournalLeaseBusy } from "../errors.ts";

const TOKEN = "alice-secret-0123456789";
const T0 = 1_700_000_000_000;
const napper = flow("term.napper", {
  durable: true,
  do: async (_: { x: number }, fx) => {
    await fx.clock.sleep("nap", "1h");
    return "woke";
  },
});
/** A durable consumer that parks: its message is settled delivered at the park. */
const jobs = signal.once("term.jobs", { retries: 2 });
const worker = on(
  jobs,
  flow("term.worker", {
    durable: true,
    do: async (_: { n: number }, fx) => {
      await fx.clock.sleep("wait", "1h");
    },
  }),
);
/** The same, on a signal that keeps no dead letters. */
const notes = signal.once("term.notes", { deadLetter: false });
const noter = on(
  notes,
  flow("term.noter", {
    durable: true,
    do: async (_: { n: number }, fx) => {
      await fx.clock.sleep("wait", "1h");
    },
  }),
);
/** Runs of a flow this app does not have: nothing in it takes them, so the test sets their state. */
const GONE = "term.gone";

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- response bodies are checked field by field
type Body = any;

describe.each(drivers)("Console API terminate on the $name driver", (driver) => {
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    while (cleanups.length > 0) await cleanups.pop()!();
  });

  async function start(wrap: (s: Store) => Store = (s) => s): Promise<{
    store: Store;
    time: TimeTravel;
    app: App;
    invoke: () => Promise<void>;
    api: (path: string, body?: unknown, token?: string | null) => Promise<{ status: number; body: Body }>;
  }> {
    const made = await driver.make();
    cleanups.push(made.cleanup);
    const time = createTimeTravel(T0);
    const store = wrap(made.store);
    const app = createApp({
      modules: [{ napper, jobs, worker, notes, noter }],
      env: "test",
      clock: time,
      store,
      config: { console: { port: 0, tokens: { alice: TOKEN } } },
    });
    cleanups.push(() => app.stop({ timeoutMs: 2_000 }));
    const { console: c } = await app.start({ port: 0, host: "127.0.0.1" });
    const url = c!.url;
    return {
      store,
      time,
      app,
      invoke: async () => {
        await app.invoke(napper, { x: 1 });
        await app.idle();
      },
      api: async (path, body, token = TOKEN) => {
        const headers = new Headers({ "x-oke-console": "1" });
        if (token !== null) headers.set("authorization", `Bearer ${token}`);
        if (body !== undefined) headers.set("content-type", "application/json");
        const res = await fetch(url + path, {
          method: body === null ? "GET" : "POST",
          headers,
          ...(body === undefined || body === null ? {} : { body: JSON.stringify(body) }),
        });
        return { status: res.status, body: await res.json() };
      },
    };
  }

  it("ends a sleeping run failed with OKE1339 naming who, when and why; audited; a second try is 409 (already failed); a missing run 404", async () => {
    const { api, invoke, store } = await start();
    await invoke();
    const [run] = await store.listRuns({ status: "sleeping" });
    expect(run).toBeDefined();
    const id = run!.id;
    const done = await api(`/api/runs/${id}/terminate`, { reason: "flow retired" });
    expect(done.status).toBe(200);
    const error = {
      code: "OKE1339",
      message: `terminated by alice at ${new Date(T0).toISOString()}: flow retired`,
    };
    expect(done.body).toMatchObject({
      outcome: "terminated",
      run: { id, status: "failed", wakeAt: null, error },
    });
    expect((await api(`/api/runs/${id}`, null)).body.run).toMatchObject({ status: "failed", error });
    expect(await store.getRun(id)).toMatchObject({ status: "failed", leaseOwner: null, wakeAt: null, error });
    expect((await api("/api/audit", null)).body.items[0]).toMatchObject({
      actor: "alice",
      action: "terminate",
      target: `run:${id}`,
      detail: { outcome: "terminated", reason: "flow retired" },
    });

    const again = await api(`/api/runs/${id}/terminate`, {});
    expect(again.status).toBe(409);
    expect(again.body.error).toMatchObject({
      code: "OKE1611",
      message: `console: run "${id}" is already failed: there is nothing to terminate`,
    });
    const missing = await api("/api/runs/nope/terminate");
    expect(missing.status).toBe(404);
    expect(missing.body.error).toMatchObject({ code: "OKE1606", message: 'console: no run "nope"' });
  });

  it("ends a held-back run without a reason; refuses a run with a live holder (409 naming it and its lease's lapse), changing nothing", async () => {
    const { api, store } = await start();
    await store.startRun({
      id: "held",
      flow: GONE,
      input: 1,
      parentRunId: null,
      owner: "i/1",
      now: T0,
      leaseMs: 60_000,
    });
    await store.releaseRun({
      runId: "held",
      owner: "i/1",
      now: T0,
      retryAt: T0 + 30_000,
      hold: { code: "OKE1301", message: "journal mismatch" },
    });
    const done = await api("/api/runs/held/terminate");
    expect(done.status).toBe(200);
    expect(done.body.run).toMatchObject({
      status: "failed",
      error: { code: "OKE1339", message: `terminated by alice at ${new Date(T0).toISOString()}` },
    });
    expect(done.body.run.held).toBeUndefined();

    await store.startRun({
      id: "busy",
      flow: GONE,
      input: 1,
      parentRunId: null,
      owner: "i/2",
      now: T0,
      leaseMs: 60_000,
    });
    const before = await store.getRun("busy");
    const refused = await api("/api/runs/busy/terminate", { reason: "stop" });
    expect(refused.status).toBe(409);
    expect(refused.body.error.code).toBe("OKE1611");
    expect(refused.body.error.message).toContain(
      `run "busy" is held by i/2, whose lease lapses at ${new Date(T0 + 60_000).toISOString()}`,
    );
    expect(await store.getRun("busy")).toEqual(before);
  });

  it("validates the reason (400 naming it), needs the operator token (401), and answers 501 when the store cannot terminate", async () => {
    const { api, invoke, store } = await start();
    await invoke();
    const [run] = await store.listRuns({ status: "sleeping" });
    const path = `/api/runs/${run!.id}/terminate`;
    for (const body of [{ reason: "x".repeat(501) }, { reason: 7 }, ["x"]]) {
      const bad = await api(path, body);
      expect(bad.status).toBe(400);
      expect(bad.body.error.code).toBe("OKE1605");
      if (!Array.isArray(body)) expect(bad.body.error.message).toContain('"reason"');
    }
    expect((await api(path, {}, null)).status).toBe(401);
    expect(await store.getRun(run!.id)).toMatchObject({ status: "sleeping" });
    expect((await api(path, { reason: "x".repeat(500) })).status).toBe(200);
  });

  it("answers 409 OKE1611, audited, when the store lost its race with the run's takes every time it tried (JournalLeaseBusy)", async () => {
    const { api } = await start(
      (s) =>
        new Proxy(s, {
          get: (t, k) =>
            k === "terminateRun"
              ? (req: { runId: string }) => Promise.reject(new JournalLeaseBusy(req.runId))
              : Reflect.get(t, k),
        }),
    );
    const res = await api("/api/runs/spinning/terminate", { reason: "stop" });
    expect(res.status).toBe(409);
    expect(res.body.error).toMatchObject({
      code: "OKE1611",
      message:
        'console: run "spinning" was taken and given back by instances while the terminate tried, three times over: nothing changed; try again',
    });
    expect((await api("/api/audit", null)).body.items[0]).toMatchObject({
      actor: "alice",
      action: "terminate",
      target: "run:spinning",
      detail: { outcome: "busy" },
    });
  });

  it("answers 501 OKE1612 when the app's store has no terminateRun (a third-party driver)", async () => {
    const { api } = await start(
      (s) => new Proxy(s, { get: (t, k) => (k === "terminateRun" ? undefined : Reflect.get(t, k)) }),
    );
    const res = await api("/api/runs/any/terminate");
    expect(res.status).toBe(501);
    expect(res.body.error.code).toBe("OKE1612");
    expect(res.body.error.message).toContain("cannot terminate runs");
  });
  it("a durable consumer's parked run: its message, delivered at the park, becomes a dead letter with the run's error, and a replay runs the work afresh", async () => {
    const { api, app, store, time } = await start();
    await app.emit(jobs, { n: 1 });
    await app.idle();
    const [run] = await store.listRuns({ flow: "term.worker", status: "sleeping" });
    const id = run!.id;
    expect((await store.getMessage(id))?.status).toBe("delivered");
    const done = await api(`/api/runs/${id}/terminate`, { reason: "job retired" });
    expect(done.status).toBe(200);
    expect(done.body.message).toEqual({ id, signal: "term.jobs", outcome: "dead" });
    const error = {
      code: "OKE1339",
      message: `terminated by alice at ${new Date(T0).toISOString()}: job retired`,
    };
    const m = await store.getMessage(id);
    expect(m).toMatchObject({ status: "dead", attempts: 1 });
    expect(m!.failures).toEqual([{ ...error, at: T0, attempt: 1 }]);
    expect((await api("/api/audit", null)).body.items[0]).toMatchObject({
      actor: "alice",
      action: "terminate",
      target: "signal:term.jobs",
      detail: { messageId: id, run: id, outcome: "dead" },
    });
    // Listed among the dead letters, and a replay runs it afresh as its next run.
    expect((await api("/api/signals/term.jobs/replay", { ids: [id] })).status).toBe(200);
    await app.idle();
    expect(await store.getRun(`${id}.r1`)).toMatchObject({ status: "sleeping", flow: "term.worker" });
    time.advance("1h");
    await app.idle();
    expect((await store.getRun(`${id}.r1`))?.status).toBe("completed");
    expect((await store.getRun(id))?.status).toBe("failed");
  });

  it("a consumer on a signal that keeps no dead letters: the message stays delivered with the run's failure recorded", async () => {
    const { api, app, store } = await start();
    await app.emit(notes, { n: 1 });
    await app.idle();
    const [run] = await store.listRuns({ flow: "term.noter", status: "sleeping" });
    const done = await api(`/api/runs/${run!.id}/terminate`, {});
    expect(done.body.message).toEqual({ id: run!.id, signal: "term.notes", outcome: "delivered" });
    const m = await store.getMessage(run!.id);
    expect(m?.status).toBe("delivered");
    expect(m?.failures.map((f) => f.code)).toEqual(["OKE1339"]);
  });

  it("a terminate whose message was left delivered (the answer lost in an outage) is completed by the operator's retry", async () => {
    let failResettle = true;
    const { api, app, store } = await start(
      (s) =>
        new Proxy(s, {
          get: (t, k) =>
            k === "resettleDelivered" && failResettle
              ? () => Promise.reject(new Error("connection lost (test outage)"))
              : Reflect.get(t, k),
        }),
    );
    await app.emit(jobs, { n: 2 });
    await app.idle();
    const [run] = await store.listRuns({ flow: "term.worker", status: "sleeping" });
    const id = run!.id;
    expect((await api(`/api/runs/${id}/terminate`, {})).status).toBe(500);
    expect((await store.getRun(id))?.status).toBe("failed");
    expect((await store.getMessage(id))?.status).toBe("delivered");
    failResettle = false;
    const again = await api(`/api/runs/${id}/terminate`, {});
    expect(again.status).toBe(409);
    expect(again.body.error.message).toBe(
      `console: run "${id}" is already failed: there is nothing to terminate; its message ${id} (term.jobs) was still delivered and is now a dead letter`,
    );
    expect((await store.getMessage(id))?.status).toBe("dead");
  });
  it("a consumer run whose message is still in flight: the answer says so, and the message's next claim dead-letters it at once, its retries unspent", async () => {
    const { api, store, time } = await start();
    const orphaned = signal.once("term.orphaned", { retries: 3 });
    // A message of a signal this app does not bind, claimed by an instance that died in its run.
    await store.enqueue(
      [{ id: "m1gone", signal: orphaned.name, key: null, payload: {}, parentRunId: null }],
      T0,
    );
    await store.claim({ signal: orphaned.name, worker: "i/9", max: 1, now: T0, leaseMs: 30_000 });
    await store.startRun({
      id: "m1gone",
      flow: GONE,
      input: {},
      parentRunId: null,
      owner: "i/9",
      now: T0,
      leaseMs: 30_000,
    });
    time.advance(60_000);
    const done = await api("/api/runs/m1gone/terminate", { reason: "flow retired" });
    expect(done.status).toBe(200);
    expect(done.body.message).toEqual({ id: "m1gone", signal: "term.orphaned", outcome: "inflight" });
    // An instance of the version that has the flow comes back: its claim finds the run terminated.
    let ran = 0;
    const consumer = on(
      orphaned,
      flow(GONE, {
        durable: true,
        do: () => {
          ran++;
        },
      }),
    );
    const back = createApp({ modules: [{ orphaned, consumer }], env: "test", clock: time, store });
    cleanups.push(() => back.stop({ timeoutMs: 2_000 }));
    await back.start({ port: 0, host: "127.0.0.1" });
    await until(
      async () => (await store.getMessage("m1gone"))?.status === "dead",
      "the message dead-lettered",
    );
    const m = await store.getMessage("m1gone");
    expect(m?.attempts).toBe(2);
    expect(m?.failures.map((f) => f.code)).toEqual(["OKE1339"]);
    expect(ran).toBe(0);
  });
});
