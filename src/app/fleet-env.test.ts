// Boot's fleet check: a dev or test instance refuses a store live prod instances use (OKE1084); prod only warns.
import { spawnSync } from "node:child_process";
import { hostname } from "node:os";
import pino from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { createApp, flow, http, on, signal } from "../index.ts";
import { createTimeTravel } from "../clock/time-travel.ts";
import { isOkeError } from "../errors.ts";
import { createMemoryStore } from "../store/memory/memory-store.ts";
import type { Store } from "../store/types.ts";
import { drivers } from "../../test/conformance/drivers.ts";
import type { App, Env, InstanceRole } from "./types.ts";

const stops: Array<() => Promise<void>> = [];
afterEach(async () => {
  while (stops.length > 0) await stops.pop()!();
});

function captured() {
  const lines: Array<{ level: number; msg: string } & Record<string, unknown>> = [];
  const logger = pino({ level: "info" }, { write: (l: string) => void lines.push(JSON.parse(l)) });
  return { logger, warnings: () => lines.filter((l) => l.level === 40) };
}

function fleet() {
  const jobs = signal.once<{ n: number }>("fleet.jobs");
  const done: number[] = [];
  const exports = {
    jobs,
    worker: on(jobs, flow("fleet.worker", { do: ({ n }: { n: number }) => void done.push(n) })),
    enqueue: on(
      http.post("/jobs"),
      flow("fleet.enqueue", {
        do: async (_: unknown, fx) => {
          await fx.emit(jobs, { n: 1 });
          return { queued: true };
        },
      }),
    ),
  };
  return { exports, done };
}

const clock = createTimeTravel(1_700_000_000_000);

function instance(
  store: Store,
  env: Env,
  exports: Record<string, unknown>,
  o: { role?: InstanceRole; logger?: pino.Logger } = {},
): App {
  const app = createApp({
    modules: [{ exports }],
    env,
    store,
    clock,
    ...(o.role === undefined ? {} : { role: o.role }),
    ...(o.logger === undefined ? {} : { logger: o.logger }),
  });
  stops.push(() => app.stop({ timeoutMs: 1_000 }));
  return app;
}

const pending = async (store: Store): Promise<number> =>
  (await store.pageMessages({ signal: "fleet.jobs", status: "pending", limit: 10 })).items.length;

describe.each(drivers)("boot's check of the environments on one $name store", (driver) => {
  for (const env of ["dev", "test"] as const)
    it(`a ${env} instance refuses to boot while a prod instance is alive on its store, and takes nothing`, async () => {
      const made = await driver.make();
      stops.push(made.cleanup);
      const store = made.store;
      const { exports, done } = fleet();
      // Production's web instance queues a job its workers would run.
      const prod = instance(store, "prod", exports, { role: "web" });
      await prod.boot();
      expect((await prod.request("/jobs", { method: "POST" })).status).toBe(200);
      expect(await pending(store)).toBe(1);

      const stray = instance(store, env, exports);
      const error = await stray.boot().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(isOkeError(error) && error.code).toBe("OKE1084");
      const e = error as Error & { fix?: string };
      expect(e.message).toBe(
        `oke boot: 1 live prod instance (${hostname()}:${process.pid}) use this store (the ${driver.name} store): ` +
          `this ${env} instance would take production's queued messages and runs`,
      );
      expect(e.fix).toContain("database.schema");
      expect(await pending(store)).toBe(1);
      expect(done).toEqual([]);
      expect((await store.listInstances(0)).map((i) => i.env)).toEqual(["prod"]);

      // Production gone (a clean stop leaves the list): the same instance may use the store.
      await prod.stop({ timeoutMs: 1_000 });
      const after = instance(store, env, exports);
      await after.boot();
      await after.idle();
      expect(done).toEqual([1]);
    });
});

describe("boot's check of the environments on one store", () => {
  it("a prod instance boots beside a dev one, warning about it by name; dev beside test warns too", async () => {
    const store = createMemoryStore();
    const { exports } = fleet();
    const dev = instance(store, "dev", exports);
    await dev.boot();
    const { logger, warnings } = captured();
    const prod = instance(store, "prod", exports, { logger });
    await prod.boot();
    expect(warnings().map((w) => w.msg)).toContainEqual(
      `okengine: 1 live dev instance (${hostname()}:${process.pid}) share this store (the memory store) with this prod instance: ` +
        "each takes the other's queued messages and runs; give one of them a database or schema of its own",
    );
    await prod.stop({ timeoutMs: 1_000 });

    const t = captured();
    const test = instance(store, "test", exports, { logger: t.logger });
    await test.boot();
    expect(t.warnings().map((w) => w.msg)).toContainEqual(expect.stringContaining("1 live dev instance"));
  });

  it("a heartbeat of a process of this host that is gone (killed within the last 30 s) is not a live fleet", async () => {
    const store = createMemoryStore();
    const { exports } = fleet();
    const gone = spawnSync(process.execPath, ["-e", ""]).pid;
    // A prod instance's heartbeat a second old, from `host`.
    const beat = (id: string, host: string) =>
      store.heartbeat(
        {
          id,
          version: "1.0.0",
          okengineVersion: "0.1.0",
          host,
          pid: gone,
          env: "prod",
          startedAt: clock.now() - 60_000,
          flows: [],
          signals: [],
          console: null,
        },
        clock.now() - 1_000,
      );
    await beat("killed", hostname());
    // Another host's heartbeat cannot be checked: it counts while it is fresh.
    await beat("elsewhere", `not-${hostname()}`);
    const dev = instance(store, "dev", exports);
    await expect(dev.boot()).rejects.toThrow(`1 live prod instance (not-${hostname()}:${gone})`);
    await store.removeInstance("elsewhere");
    const again = instance(store, "dev", exports);
    await again.boot();
  });
});
