// Instance roles: a web instance serves HTTP and emits but consumes nothing; a worker consumes and serves no routes.
import { afterEach, describe, expect, it } from "vitest";
import { createApp, every, flow, http, on, signal } from "../index.ts";
import { createTimeTravel } from "../clock/time-travel.ts";
import { BROADCAST_PHYSICS } from "../signal/broadcast-runtime.ts";
import { createMemoryStore } from "../store/memory/memory-store.ts";
import type { Store } from "../store/types.ts";
import { resolveConfig } from "./config.ts";
import type { App, InstanceRole } from "./types.ts";

const stops: Array<() => Promise<void>> = [];
afterEach(async () => {
  while (stops.length > 0) await stops.pop()!();
});

/** One app's modules, loaded by every instance of the fleet: a route, a once worker, a durable sleeper, a broadcast subscriber. */
function modules() {
  const jobs = signal.once<{ n: number }>("role.jobs");
  const news = signal.broadcast<{ n: number }>("role.news");
  const done: number[] = [];
  const heard: number[] = [];
  const worker = on(
    jobs,
    flow("role.worker", {
      do: ({ n }: { n: number }) => void done.push(n),
    }),
  );
  const listener = on(news, flow("role.listener", { do: ({ n }: { n: number }) => void heard.push(n) }));
  const enqueue = on(
    http.post("/jobs"),
    flow("role.enqueue", {
      do: async (_: unknown, fx) => {
        await fx.emit(jobs, { n: 7 });
        return { queued: true };
      },
    }),
  );
  const nap = on(
    http.post("/nap"),
    flow("role.nap", {
      durable: true,
      do: async (_: unknown, fx) => {
        await fx.clock.sleep("nap", "1h");
        done.push(-1);
      },
    }),
  );
  return { exports: { jobs, news, worker, listener, enqueue, nap }, jobs, done, heard };
}

function instance(
  store: Store,
  role: InstanceRole,
  exports: Record<string, unknown>,
  clock = createTimeTravel(0),
): App {
  const app = createApp({ modules: [{ exports }], env: "test", store, clock, role });
  stops.push(() => app.stop({ timeoutMs: 1_000 }));
  return app;
}

describe("instance roles", () => {
  it("a web instance serves its routes and emits but claims nothing; a worker on the same store consumes", async () => {
    const store = createMemoryStore();
    const m = modules();
    const web = instance(store, "web", m.exports);
    await web.boot();
    expect(web.role).toBe("web");

    // An emit of a once signal bound in the modules is allowed (no OKE1240): it is consumed elsewhere.
    await web.emit(m.jobs, { n: 1 }, { id: "m1" });
    const res = await web.request("/jobs", { method: "POST" });
    expect(res.status).toBe(200);
    await web.idle();
    expect(m.done).toEqual([]);
    expect((await store.getMessage("m1"))?.status).toBe("pending");
    expect((await store.stats("role.jobs", 0)).pending).toBe(2);

    const worker = instance(store, "worker", m.exports);
    await worker.boot();
    await worker.idle();
    expect(m.done.sort()).toEqual([1, 7]);
    expect((await store.getMessage("m1"))?.status).toBe("delivered");
  });

  it("a worker instance serves none of the app's routes, only /_/health and /_/ready", async () => {
    const m = modules();
    const worker = instance(createMemoryStore(), "worker", m.exports);
    await worker.boot();
    const res = await worker.request("/jobs", { method: "POST" });
    expect(res.status).toBe(404);
    expect(m.done).toEqual([]);
    expect((await worker.request("/_/health")).status).toBe(200);
    expect((await worker.request("/_/ready")).status).toBe(200);
  });

  it("a durable run a web request started runs inline until it parks; its wake happens on a worker", async () => {
    const store = createMemoryStore();
    const clock = createTimeTravel(0);
    const m = modules();
    const web = instance(store, "web", m.exports, clock);
    await web.boot();
    expect((await web.request("/nap", { method: "POST" })).status).toBe(204);
    const [run] = await store.listRuns({ flow: "role.nap" });
    expect(run?.status).toBe("sleeping");

    clock.advance("2h");
    await web.idle();
    expect((await store.getRun(run!.id))?.status).toBe("sleeping");
    expect(m.done).toEqual([]);

    const worker = instance(store, "worker", m.exports, clock);
    await worker.boot();
    await worker.idle();
    expect((await store.getRun(run!.id))?.status).toBe("completed");
    expect(m.done).toEqual([-1]);
  });

  it("a web instance fires no schedule; a worker does", async () => {
    const store = createMemoryStore();
    const clock = createTimeTravel(0);
    const slots: number[] = [];
    const tick = on(
      every("1m"),
      flow("role.tick", { do: ({ scheduledAt }) => void slots.push(scheduledAt) }),
    );
    const web = instance(store, "web", { tick }, clock);
    await web.boot();
    clock.advance("3m");
    await web.idle();
    expect(slots).toEqual([]);

    const worker = instance(store, "worker", { tick }, clock);
    await worker.boot();
    clock.advance("1m");
    await worker.idle();
    expect(slots.length).toBeGreaterThan(0);
  });

  it("a web instance announces no broadcast subscription: its emits go to the workers' subscribers", async () => {
    const store = createMemoryStore();
    const clock = createTimeTravel(0);
    const m = modules();
    const web = instance(store, "web", m.exports, clock);
    await web.boot();
    expect(await store.liveSubscriptions(0)).toEqual([]);
    // Its own binding is not a subscriber: with no worker announced, the emit has nobody to reach,
    // and says the flows are bound but not running (not "no subscriber… add on(signal, …)").
    await expect(web.emit(signal.broadcast<{ n: number }>("role.news"), { n: 0 })).rejects.toMatchObject({
      code: "OKE1240",
      message:
        'Flow "app.emit" emits broadcast signal "role.news", whose flows (role.listener) no instance of the fleet runs now.',
      fix: expect.stringMatching(
        /^Run an instance with role all or worker \(a web instance runs no broadcast flows/,
      ),
    });

    const worker = instance(store, "worker", m.exports, clock);
    await worker.boot();
    expect(await store.liveSubscriptions(0)).toEqual([{ signal: "role.news", flow: "role.listener" }]);
    // Past the emitter's cached read of the fleet (BROADCAST_PHYSICS.REFRESH_MS), which had no subscriber.
    clock.advance(BROADCAST_PHYSICS.REFRESH_MS);
    // One copy, for the worker's subscription: the web instance made none for itself.
    await web.emit(signal.broadcast<{ n: number }>("role.news"), { n: 3 });
    await Promise.all([web.idle(), worker.idle()]);
    expect(m.heard).toEqual([3]);
  });
});

describe("instance.role setting", () => {
  it("comes from createApp's role, else instance.role, else OKE_ROLE, else all; a bad value is refused", () => {
    expect(resolveConfig(undefined, "test", {}).role).toBe("all");
    expect(resolveConfig(undefined, "test", { OKE_ROLE: "worker" }).role).toBe("worker");
    expect(resolveConfig({ instance: { role: "web" } }, "test", { OKE_ROLE: "worker" }).role).toBe("web");
    expect(
      resolveConfig({ instance: { role: "web" }, env: { test: { instance: { role: "all" } } } }, "test", {})
        .role,
    ).toBe("all");
    expect(() => resolveConfig(undefined, "test", { OKE_ROLE: "api" })).toThrow(
      'oke boot: OKE_ROLE must be all, web or worker, got "api"',
    );
    expect(() => resolveConfig({ instance: { role: "both" as never } }, "test", {})).toThrow(
      'oke boot: instance.role must be all, web or worker, got "both"',
    );
    expect(() => resolveConfig({ instance: { rol: "web" } as never }, "test", {})).toThrow(
      'oke config: unknown setting "instance.rol"',
    );
    const app = createApp({
      modules: [],
      env: "test",
      config: { instance: { role: "worker" } },
      role: "web",
    });
    expect(app.role).toBe("web");
    expect(() => createApp({ modules: [], env: "test", role: "x" as never })).toThrow(
      'oke boot: createApp({ role }) must be all, web or worker, got "x"',
    );
  });
});
