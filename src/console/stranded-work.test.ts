// The dev boot's stranded-work warnings: runs of a renamed flow and messages of a removed worker are named in the log.
import { describe, expect, it } from "vitest";
import { createApp, flow, http, on, signal } from "../index.ts";
import type { Store } from "../store/types.ts";
import { createMemoryStore } from "../store/memory/memory-store.ts";
import { recordingLogger } from "../../test/conformance/app-fixture.ts";

const task = signal.once("tasks.mail");
const worker = on(task, flow("workers.mail", { do: () => undefined }));
const trial = on(
  http.post("/trials/start"),
  flow("trials.start", {
    durable: true,
    do: async (_: unknown, fx) => {
      await fx.clock.sleep("window", "1h");
    },
  }),
);
// What the app became: the flow renamed (its export `start` → `begin`) and the worker removed.
const renamed = on(
  http.post("/trials/begin"),
  flow("trials.begin", {
    durable: true,
    do: async (_: unknown, fx) => {
      await fx.clock.sleep("window", "1h");
    },
  }),
);

/** A store holding one parked run of trials.start and one pending message on tasks.mail, its app stopped. */
async function storeWithWork(): Promise<Store> {
  const store = createMemoryStore();
  const app = createApp({ env: "test", modules: [{ trial }], store, logger: recordingLogger().logger });
  await app.boot();
  await app.request("/trials/start", { method: "POST" });
  expect(await app.operator.runs({ status: "sleeping" })).toHaveLength(1);
  await app.stop();
  // Its worker never booted (an emit before boot only opens the store), so the message stays pending.
  const emitter = createApp({
    env: "test",
    modules: [{ task, worker }],
    store,
    logger: recordingLogger().logger,
  });
  await emitter.emit(task, { to: "a@example.com" });
  await emitter.stop();
  expect((await store.stats("tasks.mail", 0)).pending).toBe(1);
  return store;
}

/** Boots an app on `store` in `env` and stops it (which waits for the check after boot); its warn lines. */
async function warnsAtBoot(
  store: Store,
  env: "dev" | "test",
  modules: Array<Record<string, unknown>>,
): Promise<string[]> {
  const { logger, records } = recordingLogger();
  const app = createApp({ env, modules, store, logger });
  await app.boot();
  await app.stop();
  return records.filter((l) => l.level === 40).map((l) => String(l.msg));
}

const stranded = (msgs: string[]): string[] => msgs.filter((m) => m.includes("stranded"));

describe("stranded work at a dev boot", () => {
  it("names the runs of a flow and the messages of a signal no live instance has, with what to do", async () => {
    const store = await storeWithWork();
    expect(stranded(await warnsAtBoot(store, "dev", [{ renamed }]))).toEqual([
      "okengine: 1 run of flow trials.start is stranded (sleeping 1): no live instance has this flow (renamed or removed?), so it waits; nothing is lost. " +
        "List them with oke runs --flow trials.start; deploy or restore the flow to resume them where they stopped, or end one with oke terminate <id>.",
      "okengine: 1 pending message on signal tasks.mail is stranded: no live instance consumes this signal (its worker removed?), so it waits; nothing is lost. " +
        "Restore its worker to deliver it, or drop what is pending with oke discard tasks.mail --pending --all.",
    ]);
  });

  it("counts every live instance: a flow another instance has is not stranded", async () => {
    const store = await storeWithWork();
    const other = createApp({ env: "dev", modules: [{ trial }], store, logger: recordingLogger().logger });
    await other.boot();
    try {
      expect(stranded(await warnsAtBoot(store, "dev", [{ renamed }]))).toEqual([
        expect.stringMatching(/^okengine: 1 pending message on signal tasks\.mail is stranded: /),
      ]);
    } finally {
      await other.stop();
    }
  });

  it("says nothing in env test", async () => {
    const store = await storeWithWork();
    expect(stranded(await warnsAtBoot(store, "test", [{ renamed }]))).toEqual([]);
  });

  it("says nothing when the app has the flow and the worker", async () => {
    const store = await storeWithWork();
    expect(stranded(await warnsAtBoot(store, "dev", [{ task, worker, trial }]))).toEqual([]);
  });
});
