// A stop() while boot is still running ends the boot at its next step; a stopped app refuses live readers.
import { afterEach, describe, expect, it } from "vitest";
import { gatedStore, until } from "../../test/conformance/app-fixture.ts";
import { createApp, createTimeTravel, flow, on, signal } from "../index.ts";
import { createMemoryStore } from "../store/memory/memory-store.ts";

/** A memory store whose orphan scan (listOrphans) answers only once the test opens the gate. */
function gatedOrphanScan() {
  const raw = createMemoryStore();
  const { store, state } = gatedStore(raw, "listOrphans");
  state.gated = true;
  return { raw, store, state };
}

describe("stop during boot", () => {
  const closers: Array<() => Promise<void>> = [];
  afterEach(async () => {
    while (closers.length > 0) await closers.pop()!();
  });

  it("boot rejects with OKE1097 at its next step and starts nothing after the stop", async () => {
    const { raw, store, state } = gatedOrphanScan();
    closers.push(() => raw.close());
    const task = signal.once("boot.tasks");
    const worker = on(task, flow("boot.worker", { do: () => undefined }));
    const nap = flow("boot.nap", { durable: true, do: () => undefined });
    const app = createApp({
      env: "test",
      modules: [{ task, worker, nap }],
      store,
      clock: createTimeTravel(1_000_000),
    });

    const booting = app.boot();
    await until(() => state.waiting === 1, "the orphan scan");
    const stopping = app.stop({ timeoutMs: 2_000 });
    state.gate.open();
    await expect(booting).rejects.toMatchObject({ code: "OKE1097" });
    await expect(booting).rejects.toThrow("stopped while booting, after the orphan scan");
    await stopping;

    // Nothing that boot starts after the orphan scan ran: no heartbeat lists this instance (it would
    // stay listed, since stop() had no heartbeat to end), and the state is not set back to ready.
    expect(await raw.listInstances(0)).toEqual([]);
    expect(app.readiness()).toEqual({ ready: false, reason: "stopping" });
  });

  it("a stopped app refuses a live reader (OKE1089) instead of registering one that hears nothing", async () => {
    const feed = signal.live("boot.feed");
    const app = createApp({ env: "test", modules: [{ feed }], store: createMemoryStore() });
    await app.boot();
    await app.stop();
    expect(() => app.live(feed, {}, () => undefined)).toThrow("app.live(): the app is stopped");
  });
});
