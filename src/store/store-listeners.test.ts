// A store listener that throws or rejects is logged, never a crash or an unhandled rejection; the others still hear the event.
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { recordingLogger } from "../../test/conformance/app-fixture.ts";
import { createMemoryStore } from "./memory/memory-store.ts";
import { createStoreListeners } from "./store-listeners.ts";
import type { StoreEvent } from "./types.ts";

/** Everything that would have escaped: uncaught exceptions, unhandled rejections, process warnings. */
const escaped: { uncaught: unknown[]; unhandled: unknown[]; warnings: Error[] } = {
  uncaught: [],
  unhandled: [],
  warnings: [],
};
const onUncaught = (e: unknown): void => void escaped.uncaught.push(e);
const onUnhandled = (e: unknown): void => void escaped.unhandled.push(e);
const onWarning = (w: Error): void => void escaped.warnings.push(w);

beforeEach(() => {
  escaped.uncaught = [];
  escaped.unhandled = [];
  escaped.warnings = [];
  process.on("uncaughtException", onUncaught);
  process.on("unhandledRejection", onUnhandled);
  process.on("warning", onWarning);
});
afterEach(() => {
  process.off("uncaughtException", onUncaught);
  process.off("unhandledRejection", onUnhandled);
  process.off("warning", onWarning);
});

/** Lets queued microtasks and one macrotask run, so anything re-thrown later would surface. */
const settle = () => new Promise((r) => setTimeout(r, 0));

describe("store listeners", () => {
  it("a throwing and a rejecting listener are logged; the next listener still hears the event", async () => {
    const { logger, records } = recordingLogger();
    const l = createStoreListeners(logger);
    const heard: StoreEvent[] = [];
    l.subscribe(() => {
      throw new Error("listener boom");
    });
    // A third-party listener written async (the type says void; JavaScript callers are not checked).
    const asyncListener = async (): Promise<void> => {
      await Promise.resolve();
      throw new Error("async listener boom");
    };
    // eslint-disable-next-line @typescript-eslint/no-misused-promises -- the case under test: a listener that returns a rejecting promise
    l.subscribe(asyncListener);
    l.subscribe((e) => void heard.push(e));
    expect(() => l.emit({ kind: "wake" })).not.toThrow();
    await settle();
    expect(heard).toEqual([{ kind: "wake" }]);
    const failures = records.filter(
      (r) => r.msg === "store listener failed; the write it was told about stands",
    );
    expect(failures.map((r) => (r.err as { message: string }).message).sort()).toEqual([
      "async listener boom",
      "listener boom",
    ]);
    expect(failures.every((r) => r.level === 40 && r.event === "wake")).toBe(true);
    expect(escaped.uncaught).toEqual([]);
    expect(escaped.unhandled).toEqual([]);
  });

  it("without a logger the failure is a process warning, not a crash", async () => {
    const l = createStoreListeners();
    l.subscribe(() => {
      throw new Error("no logger boom");
    });
    l.emit({ kind: "enqueued", signal: "s" });
    await settle();
    expect(escaped.warnings.map((w) => w.message)).toEqual([
      "okengine: store listener failed; the write it was told about stands: Error: no logger boom",
    ]);
    expect(escaped.uncaught).toEqual([]);
  });

  it("through a driver: the write that announced the event commits and resolves; the failure is logged", async () => {
    const { logger, records } = recordingLogger();
    const store = createMemoryStore(undefined, { logger });
    store.subscribe(() => {
      throw new Error("subscriber boom");
    });
    await store.enqueue([{ id: "m1", signal: "s", key: null, payload: 1, parentRunId: null }], 1_000);
    await settle();
    expect((await store.getMessage("m1"))?.status).toBe("pending");
    expect(
      records.some((r) => (r.err as { message?: string } | undefined)?.message === "subscriber boom"),
    ).toBe(true);
    expect(escaped.uncaught).toEqual([]);
    expect(escaped.unhandled).toEqual([]);
  });
});
