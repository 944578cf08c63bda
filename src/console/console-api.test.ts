// The Console API over HTTP: signals, messages, dead letters, replay at a rate, runs, auth.
import { afterEach, describe, expect, it } from "vitest";
import { createApp } from "../app/app.ts";
import type { App } from "../app/types.ts";
import { createTimeTravel, type TimeTravel } from "../clock/time-travel.ts";
import { clock, flow, on, signal } from "../index.ts";
import { drivers } from "../../test/conformance/drivers.ts";
import { until } from "../../test/conformance/app-fixture.ts";

const TOKEN = "alice-secret-0123456789";
const jobs = signal.once<{ n: number; fail?: boolean }>("jobs.run", { retries: 1 });
const delivered: number[] = [];
const worker = on(
  jobs,
  flow("jobs.work", {
    do: ({ n, fail }: { n: number; fail?: boolean }) => {
      if (fail && !delivered.includes(-n))
        throw Object.assign(new Error(`job ${n} broke`), { code: "E_JOB" });
      delivered.push(n);
    },
  }),
);
const child = flow("trip.child", {
  durable: true,
  do: async (_: { x: number }, fx) => fx.step("inner", () => 42),
});
const parent = flow("trip.parent", {
  durable: true,
  do: async (_: { x: number }, fx) => {
    await fx.step("book", () => ({ seat: "12A" }));
    await fx.emit(jobs, { n: 100 });
    await fx.call(child, { x: 1 });
    await fx.clock.sleep("wait-for-payment", "1h");
    return "done";
  },
});

let nightlyFires = 0;
const nightly = on(
  clock("reports.nightly", { cron: "0 3 * * *", overridable: true }),
  flow("reports.nightly", { do: () => void nightlyFires++ }),
);
const fixed = on(clock("reports.fixed", { every: "1d" }), flow("reports.fixed", { do: () => undefined }));

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- response bodies are checked field by field
type Body = any;

interface Started {
  app: App;
  time: TimeTravel;
  url: string;
  api: (
    path: string,
    init?: RequestInit & { token?: string | null },
  ) => Promise<{ status: number; body: Body }>;
}

describe.each(drivers)("Console API on the $name driver", (driver) => {
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    while (cleanups.length > 0) await cleanups.pop()!();
  });

  async function start(opts: { tokens?: Record<string, string> | null } = {}): Promise<Started> {
    const made = await driver.make();
    cleanups.push(made.cleanup);
    const time = createTimeTravel(1_700_000_000_000);
    const app = createApp({
      modules: [{ worker, parent, child, nightly, fixed }],
      env: "test",
      clock: time,
      store: made.store,
      config: {
        console: { port: 0, ...(opts.tokens === null ? {} : { tokens: opts.tokens ?? { alice: TOKEN } }) },
      },
    });
    cleanups.push(() => app.stop({ timeoutMs: 2_000 }));
    const { console: c } = await app.start({ port: 0, host: "127.0.0.1" });
    expect(c).toBeDefined();
    const url = c!.url;
    return {
      app,
      time,
      url,
      api: async (path, init = {}) => {
        const headers = new Headers(init.headers);
        const token = init.token === undefined ? TOKEN : init.token;
        if (token !== null) headers.set("authorization", `Bearer ${token}`);
        if (init.method === "POST") {
          headers.set("content-type", "application/json");
          if (!headers.has("x-oke-console")) headers.set("x-oke-console", "1");
        }
        const res = await fetch(url + path, { ...init, headers });
        return { status: res.status, body: await res.json() };
      },
    };
  }

  it("lists signals with counts and throughput; pages messages; shows a dead letter's failures; replays it once", async () => {
    delivered.length = 0;
    const { app, api, time } = await start();
    await app.emit(jobs, { n: 1 });
    await app.emit(jobs, { n: 2, fail: true });
    await app.emit(jobs, { n: 3, fail: true });
    await app.idle();
    const sigs = await api("/api/signals");
    expect(sigs.status).toBe(200);
    const s = sigs.body.signals.find((x: { name: string }) => x.name === "jobs.run");
    expect(s).toMatchObject({ name: "jobs.run", delivery: "once", pending: 0, dead: 2, delivered: 1 });
    expect(s.throughput.delivered.reduce((a: number, b: number) => a + b, 0)).toBe(1);

    const dead = await api("/api/signals/jobs.run/dead?limit=1");
    expect(dead.body.items).toHaveLength(1);
    expect(dead.body.next).toEqual(expect.any(String));
    const rest = await api(
      `/api/signals/jobs.run/messages?status=dead&limit=1&cursor=${encodeURIComponent(dead.body.next)}`,
    );
    expect(rest.body.items).toHaveLength(1);
    expect(rest.body.next).toBeNull();
    const first = dead.body.items[0];
    const msg = await api(`/api/messages/${first.id}`);
    expect(msg.body).toMatchObject({ id: first.id, status: "dead", attempts: 2 });
    expect(msg.body.failures).toEqual([
      expect.objectContaining({ code: "E_JOB", attempt: 1 }),
      expect.objectContaining({ code: "E_JOB", attempt: 2 }),
    ]);

    // Dry run names what would go and changes nothing.
    const dry = await api("/api/signals/jobs.run/replay", {
      method: "POST",
      body: JSON.stringify({ all: true, dryRun: true }),
    });
    expect(dry.body).toMatchObject({ dryRun: true, count: 2 });
    expect((await api("/api/signals/jobs.run")).body.dead).toBe(2);

    delivered.push(-2); // the handler succeeds from now on for job 2
    const rep = await api("/api/signals/jobs.run/replay", {
      method: "POST",
      body: JSON.stringify({ ids: [first.id, "nope"] }),
    });
    expect(rep.body).toEqual({ replayed: [first.id] });
    await app.idle();
    expect(delivered.filter((n) => n === 2)).toHaveLength(1);
    const after = await api(`/api/messages/${first.id}`);
    expect(after.body.status).toBe("delivered");
    expect(after.body.failures).toHaveLength(2); // history kept
    // Replaying it again does nothing: it is not dead any more.
    expect(
      (
        await api("/api/signals/jobs.run/replay", {
          method: "POST",
          body: JSON.stringify({ ids: [first.id] }),
        })
      ).body,
    ).toEqual({ replayed: [] });

    const disc = await api("/api/signals/jobs.run/discard", {
      method: "POST",
      body: JSON.stringify({ all: true }),
    });
    expect(disc.body.discarded).toHaveLength(1);
    const audit = await api("/api/audit");
    expect(audit.body.items.map((a: { action: string }) => a.action)).toEqual([
      "discard",
      "replay",
      "replay",
      "replay",
    ]);
    expect(audit.body.items[0]).toMatchObject({ actor: "alice", target: "signal:jobs.run", at: time.now() });
    expect(JSON.stringify(audit.body)).not.toContain("fail");
  });

  it("replays at a rate: one batch per second of the app clock", async () => {
    const { app, api, time } = await start();
    for (let n = 10; n < 15; n++) await app.emit(jobs, { n, fail: true });
    await app.idle();
    for (let n = 10; n < 15; n++) delivered.push(-n);
    const res = await api("/api/signals/jobs.run/replay", {
      method: "POST",
      body: JSON.stringify({ all: true, rate: 2 }),
    });
    expect(res.status).toBe(202);
    expect(res.body.job).toMatchObject({ total: 5, rate: 2, state: "running" });
    await until(async () => (await api("/api/replays")).body.jobs[0].replayed === 2, "first batch");
    expect((await api("/api/signals/jobs.run")).body.dead).toBe(3);
    time.advance(1_000);
    await until(async () => (await api("/api/replays")).body.jobs[0].replayed === 4, "second batch");
    time.advance(1_000);
    await until(async () => (await api("/api/replays")).body.jobs[0].state === "done", "job done");
    await app.idle();
    expect((await api("/api/signals/jobs.run")).body).toMatchObject({ dead: 0, delivered: 5 });
  });

  it("lists runs by status and flow with paging; a run's timeline links emits, calls and children; wake early completes it", async () => {
    const { app, api } = await start();
    await app.invoke(parent, { x: 1 });
    await app.idle();
    const sleeping = await api("/api/runs?status=sleeping");
    expect(sleeping.body.items).toHaveLength(1);
    const run = sleeping.body.items[0];
    expect(run).toMatchObject({ flow: "trip.parent", status: "sleeping", sleepingOn: "wait-for-payment" });
    expect(
      (await api("/api/runs?label=wait-for-payment")).body.items.map((r: { id: string }) => r.id),
    ).toEqual([run.id]);
    const all = await api("/api/runs?limit=1");
    expect(all.body.items).toHaveLength(1);
    const page2 = await api(`/api/runs?limit=1&cursor=${encodeURIComponent(all.body.next)}`);
    expect(new Set([all.body.items[0].id, page2.body.items[0].id])).toEqual(
      new Set([run.id, expect.any(String)]),
    );
    expect((await api("/api/runs?flow=trip.child")).body.items).toHaveLength(1);

    const detail = await api(`/api/runs/${run.id}`);
    const tl = detail.body.timeline;
    const kinds = tl.map((e: { kind: string }) => e.kind);
    expect(kinds).toContain("step");
    expect(kinds.at(-1)).toBe("sleep");
    expect(tl.find((e: { kind: string }) => e.kind === "step")).toMatchObject({
      name: "book",
      preview: '{"seat":"12A"}',
    });
    const emit = tl.find((e: { kind: string }) => e.kind === "emit");
    expect(emit).toMatchObject({
      name: "jobs.run",
      messageId: expect.any(String),
      messageStatus: "delivered",
    });
    const call = tl.find((e: { kind: string }) => e.kind === "call");
    expect(detail.body.children).toHaveLength(1);
    expect(call.childRunId).toBe(detail.body.children[0].id);
    expect(tl.at(-1)).toMatchObject({
      label: "wait-for-payment",
      wakeAt: expect.any(Number),
      duration: "1h",
    });
    const childDetail = await api(`/api/runs/${call.childRunId}`);
    expect(childDetail.body.ancestors.map((a: { id: string }) => a.id)).toEqual([run.id]);
    expect((await api(`/api/messages/${emit.messageId}`)).body.parentRunId).toBe(run.id);

    const woke = await api(`/api/runs/${run.id}/wake`, { method: "POST" });
    expect(woke.body).not.toHaveProperty("error");
    expect(woke.status).toBe(200);
    expect(woke.body).toMatchObject({ runId: run.id });
    await until(
      async () => (await api(`/api/runs/${run.id}`)).body.run.status === "completed",
      "run completed",
    );
    const again = await api(`/api/runs/${run.id}/wake`, { method: "POST" });
    // Not asleep any more: the spec's ClockResourceNotFoundError, as for an id that does not exist.
    expect(again.status).toBe(404);
    expect(again.body.error).toMatchObject({
      code: "ClockResourceNotFoundError",
      message: `run "${run.id}" not found`,
    });
    const missing = await api(`/api/runs/nope/wake`, { method: "POST" });
    expect(missing.status).toBe(404);
    expect(missing.body.error).toMatchObject({
      code: "ClockResourceNotFoundError",
      message: 'run "nope" not found',
    });
    expect((await api("/api/audit")).body.items[0]).toMatchObject({
      action: "wake",
      target: `run:${run.id}`,
      actor: "alice",
    });
  });

  it("lists this instance as alive with its version and what it runs; overview sums it up", async () => {
    const { api, app } = await start();
    // The first heartbeat is written as the app boots; wait for it to commit.
    await until(async () => (await api("/api/instances")).body.instances.length === 1, "heartbeat");
    const inst = await api("/api/instances");
    expect(inst.body.instances[0]).toMatchObject({
      flows: expect.arrayContaining(["jobs.work", "trip.parent", "trip.child"]),
      signals: expect.arrayContaining(["jobs.run", "clock:reports.nightly", "clock:reports.fixed"]),
      env: "test",
      version: expect.any(String),
    });
    const ov = await api("/api/overview");
    expect(ov.body).toMatchObject({ env: "test", instances: 1 });
    expect(ov.body.flows.map((f: { name: string }) => f.name)).toEqual(
      expect.arrayContaining(["jobs.work", "trip.parent"]),
    );
    await app.stop();
    cleanups.pop(); // stopped already
  });

  it("lists schedules; pauses, resumes, edits, resets and triggers one, each audited; refuses bad edits and unknown names", async () => {
    nightlyFires = 0;
    const { app, api, url } = await start();
    const list = await api("/api/schedules");
    expect(list.status).toBe(200);
    const names = list.body.schedules.map((x: { name: string }) => x.name);
    expect(names).toEqual(["reports.fixed", "reports.nightly"]);
    const s = list.body.schedules.find((x: { name: string }) => x.name === "reports.nightly");
    expect(s).toMatchObject({
      flow: "reports.nightly",
      cron: "0 3 * * *",
      every: null,
      timezone: "UTC",
      paused: false,
      overridden: false,
      overridable: true,
      nextFireAt: Date.UTC(2023, 10, 15, 3),
    });
    // The clock's queue shows as a signal of its own, labelled with its schedule.
    expect((await api("/api/signals/clock:reports.nightly")).body).toMatchObject({
      schedule: "reports.nightly",
    });

    const post = (path: string, body?: unknown) =>
      api(path, { method: "POST", ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
    const paused = await post("/api/schedules/reports.nightly/pause");
    expect(paused.status).toBe(200);
    expect(paused.body).toMatchObject({ name: "reports.nightly", paused: true, nextFireAt: null });
    expect(
      (await api("/api/schedules")).body.schedules.find(
        (x: { name: string }) => x.name === "reports.nightly",
      ),
    ).toMatchObject({ paused: true });
    const resumed = await post("/api/schedules/reports.nightly/resume");
    expect(resumed.body).toMatchObject({ paused: false, nextFireAt: Date.UTC(2023, 10, 15, 3) });

    const edited = await post("/api/schedules/reports.nightly/edit", { every: "2h" });
    expect(edited.status).toBe(200);
    expect(edited.body).toMatchObject({
      cron: null,
      every: "2h",
      overridden: true,
      declared: { cron: "0 3 * * *", every: null, timezone: "UTC" },
    });
    const zoned = await post("/api/schedules/reports.nightly/edit", {
      cron: "30 6 * * *",
      timezone: "Europe/Paris",
    });
    expect(zoned.body).toMatchObject({ cron: "30 6 * * *", every: null, timezone: "Europe/Paris" });
    const badSpec = await post("/api/schedules/reports.nightly/edit", { cron: "not a cron" });
    expect(badSpec.status).toBe(400);
    expect(badSpec.body.error.code).toBe("OKE1701");
    const badType = await post("/api/schedules/reports.nightly/edit", { every: 5 });
    expect(badType.status).toBe(400);
    expect(badType.body.error.code).toBe("OKE1605");
    const locked = await post("/api/schedules/reports.fixed/edit", { every: "2d" });
    expect(locked.status).toBe(409);
    expect(locked.body.error.message).toBe('clock "reports.fixed" is not overridable');
    const reset = await post("/api/schedules/reports.nightly/reset");
    expect(reset.body).toMatchObject({ cron: "0 3 * * *", every: null, timezone: "UTC", overridden: false });

    const fired = await post("/api/schedules/reports.nightly/trigger");
    expect(fired.status).toBe(200);
    expect(fired.body).toMatchObject({
      clock: "reports.nightly",
      messageId: expect.stringMatching(/^clock:reports\.nightly:manual:/),
      scheduledAt: app.clock.now(),
    });
    await app.idle();
    expect(nightlyFires).toBe(1);

    const missing = await post("/api/schedules/nope/pause");
    expect(missing.status).toBe(404);
    expect(missing.body.error.message).toBe('cron "nope" not found');
    const unknownAction = await post("/api/schedules/reports.nightly/explode");
    expect(unknownAction.status).toBe(404);
    expect(unknownAction.body.error.code).toBe("OKE1606");
    const anonymous = await api("/api/schedules/reports.nightly/pause", { method: "POST", token: null });
    expect(anonymous.status).toBe(401);
    const unmarked = await fetch(`${url}/api/schedules/reports.nightly/pause`, {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(unmarked.status).toBe(403);
    expect(
      (await api("/api/schedules")).body.schedules.find(
        (x: { name: string }) => x.name === "reports.nightly",
      ),
    ).toMatchObject({ paused: false });

    const audit = (await api("/api/audit")).body.items.filter((a: { target: string }) =>
      a.target.startsWith("schedule:"),
    );
    expect(audit.map((a: { action: string }) => a.action)).toEqual([
      "trigger",
      "reset",
      "edit",
      "edit",
      "resume",
      "pause",
    ]);
    expect(audit[0]).toMatchObject({ actor: "alice", target: "schedule:reports.nightly" });
    expect(audit.find((a: { action: string }) => a.action === "edit").detail).toEqual({
      cron: "30 6 * * *",
      timezone: "Europe/Paris",
    });
  });

  it("refuses requests without a valid token, cross-site mutations, and too many failed sign-ins", async () => {
    const { api, url } = await start();
    const none = await api("/api/signals", { token: null });
    expect(none.status).toBe(401);
    expect(none.body.error.code).toBe("OKE1601");
    const wrong = await api("/api/signals", { token: "not-the-token-at-all" });
    expect(wrong.status).toBe(401);
    expect(wrong.body.error.code).toBe("OKE1602");
    const noHeader = await fetch(`${url}/api/signals/jobs.run/replay`, {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify({ all: true }),
    });
    expect(noHeader.status).toBe(403);
    const foreign = await api("/api/signals/jobs.run/replay", {
      method: "POST",
      headers: { origin: "https://evil.example" },
      body: JSON.stringify({ all: true }),
    });
    expect(foreign.status).toBe(403);
    expect(foreign.body.error.code).toBe("OKE1603");
    const bad = await api("/api/signals/jobs.run/replay", {
      method: "POST",
      body: JSON.stringify({ ids: [] }),
    });
    expect(bad.status).toBe(400);
    expect((await api("/api/signals/nope/dead")).status).toBe(404);
    expect((await api("/api/runs?status=zzz")).status).toBe(400);

    // Browser sign-in: a session cookie, HttpOnly and SameSite=Strict.
    const login = await fetch(`${url}/api/login`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-oke-console": "1" },
      body: JSON.stringify({ token: TOKEN }),
    });
    expect(login.status).toBe(200);
    const cookie = login.headers.get("set-cookie")!;
    expect(cookie).toMatch(/HttpOnly; SameSite=Strict/);
    const who = await fetch(`${url}/api/whoami`, { headers: { cookie: cookie.split(";")[0]! } });
    expect(await who.json()).toMatchObject({ label: "alice", open: false });

    let status = 0;
    for (let i = 0; i < 12 && status !== 429; i++)
      status = (await api("/api/signals", { token: `wrong-token-${i}` })).status;
    expect(status).toBe(429);
    // Even the right token waits out the window once the address is over its budget.
    expect((await api("/api/signals")).status).toBe(429);
  });

  it("runs open on loopback without tokens outside production, and still refuses foreign Host names", async () => {
    const { api, url } = await start({ tokens: null });
    expect((await api("/api/signals", { token: null })).status).toBe(200);
    const page = await fetch(url + "/");
    expect(page.status).toBe(200);
    expect(page.headers.get("content-security-policy")).toContain("default-src 'none'");
    const { request } = await import("node:http");
    const status = await new Promise<number>((resolve, reject) => {
      const r = request(`${url}/api/signals`, { headers: { host: "evil.example:6533" } }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      r.on("error", reject);
      r.end();
    });
    expect(status).toBe(403);
  });
});
