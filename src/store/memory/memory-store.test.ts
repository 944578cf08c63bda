// The Store contract on the memory driver, also with the engine restored from JSON after every write.
import { describe, expect, it } from "vitest";
import { describeStoreConformance } from "../conformance/suite.ts";
import { MemoryEngine } from "./memory-engine.ts";
import { createEngineStore, createMemoryStore } from "./memory-store.ts";

describeStoreConformance(
  "memory",
  async () => {
    const store = createMemoryStore();
    await store.open();
    return { store, cleanup: () => store.close() };
  },
  {
    leaveToLease: true,
    leaveClaimsToLease: true,
    resettleDelivered: true,
    releaseHold: true,
    terminateRun: true,
    lastTapePosition: true,
    deliveredFailed: true,
    discardPending: true,
    tapeGap: true,
    journalEnds: true,
  },
);

// The file driver rebuilds the engine from snapshots: run the whole contract
// with the engine restored from a JSON round trip after every write.
describeStoreConformance(
  "memory (restored from a snapshot after every write)",
  async () => {
    let engine = new MemoryEngine();
    const proxy = new Proxy({} as MemoryEngine, {
      get: (_t, prop) => {
        const v: unknown = Reflect.get(engine, prop);
        return typeof v === "function" ? (v as (...a: unknown[]) => unknown).bind(engine) : v;
      },
    });
    const store = createEngineStore({
      driver: "memory",
      engine: proxy,
      persist: () => {
        engine = MemoryEngine.restore(JSON.parse(JSON.stringify(engine.snapshot())));
      },
    });
    return { store, cleanup: () => store.close() };
  },
  {
    leaveToLease: true,
    leaveClaimsToLease: true,
    resettleDelivered: true,
    releaseHold: true,
    terminateRun: true,
    lastTapePosition: true,
    deliveredFailed: true,
    discardPending: true,
    tapeGap: true,
    journalEnds: true,
  },
);

describe("memory store", () => {
  it("reports its driver and refuses tx with OKE1260 naming it", async () => {
    const store = createMemoryStore();
    expect(store.driver).toBe("memory");
    await expect(store.enqueue([], 0, { tx: {} })).rejects.toMatchObject({
      code: "OKE1260",
      message: 'store: transactional emit needs the postgres driver (this store is "memory")',
    });
  });

  it("refuses a duplicate message id without storing any of the batch", async () => {
    const store = createMemoryStore();
    const m = (id: string) => ({ id, signal: "s", key: null, payload: null, parentRunId: null });
    await store.enqueue([m("a")], 0);
    await expect(store.enqueue([m("b"), m("a")], 0)).rejects.toMatchObject({ code: "OKE1261" });
    await expect(store.enqueue([m("c"), m("c")], 0)).rejects.toMatchObject({ code: "OKE1261" });
    expect(await store.getMessage("b")).toBeUndefined();
    expect(await store.getMessage("c")).toBeUndefined();
  });

  it("a throwing listener neither fails the write nor starves other listeners, and crashes nothing", async () => {
    const store = createMemoryStore();
    const heard: string[] = [];
    const errors: unknown[] = [];
    const warnings: Error[] = [];
    const onError = (e: unknown): void => {
      errors.push(e);
    };
    const onWarning = (w: Error): void => {
      warnings.push(w);
    };
    process.on("uncaughtException", onError);
    process.on("warning", onWarning);
    try {
      store.subscribe(() => {
        throw new Error("listener bug");
      });
      store.subscribe((e) => heard.push(e.kind));
      await store.enqueue([{ id: "a", signal: "s", key: null, payload: null, parentRunId: null }], 0);
      expect(heard).toEqual(["enqueued"]);
      expect(await store.getMessage("a")).toBeDefined();
    } finally {
      await new Promise((r) => setTimeout(r, 0));
      process.off("uncaughtException", onError);
      process.off("warning", onWarning);
    }
    // No logger given: reported as a process warning, never re-thrown.
    expect(errors).toEqual([]);
    expect(warnings.map((w) => w.message)).toEqual([
      "okengine: store listener failed; the write it was told about stands: Error: listener bug",
    ]);
  });
});
