// LiveRuntime's one subscription to the store's tape appends: a subscribe that threw is not kept.
import { describe, expect, it } from "vitest";
import { systemClock } from "../clock/clock.ts";
import { createLogger } from "../log/logger.ts";
import { createMemoryStore } from "../store/memory/memory-store.ts";
import type { Store } from "../store/types.ts";
import { LiveRuntime } from "./live-runtime.ts";
import { signal } from "./signal.ts";

/** Waits, re-checking every 10 ms, until `check` holds (a generous deadline: speed never decides). */
async function until(check: () => boolean, what: string, ms = 10_000): Promise<void> {
  for (const deadline = Date.now() + ms; !check();) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe("LiveRuntime's subscription to tape appends", () => {
  it("a subscribe that threw is tried again by the next reader, which then follows the tape", async () => {
    const memory = createMemoryStore();
    await memory.open();
    let refuse = true;
    const store: Store = {
      ...memory,
      subscribeTapes(listener) {
        if (refuse) throw new Error("subscribe refused");
        return memory.subscribeTapes(listener);
      },
    };
    const feed = signal.live("rt.feed");
    const rt = new LiveRuntime({
      store,
      clock: systemClock,
      logger: createLogger({ format: "silent" }),
      signals: new Map([[feed.name, feed]]),
    });
    const got: unknown[] = [];
    expect(() => rt.live(feed, {}, (e) => void got.push(e.payload))).toThrow("subscribe refused");
    refuse = false;
    const stop = rt.live(feed, {}, (e) => void got.push(e.payload));
    await rt.emit(feed, { n: 1 }, undefined, { flow: "test", runId: null });
    await until(() => got.length === 1, "the entry appended after the second reader subscribed");
    expect(got).toEqual([{ n: 1 }]);
    stop();
    await rt.stop();
    await memory.close();
  });
});
