// A parked attempt lets go of its body, fx and session: only the store keeps a sleeper.
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { afterEach, describe, expect, it } from "vitest";
import { createApp } from "../../src/app/app.ts";
import { createTimeTravel } from "../../src/clock/time-travel.ts";
import { flow } from "../../src/index.ts";
import { createMemoryStore } from "../../src/store/memory/memory-store.ts";

setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()!();
});

/** A full collection once the current job's WeakRef targets are no longer kept alive. */
async function collect(): Promise<void> {
  for (let i = 0; i < 3; i++) {
    await new Promise((r) => setImmediate(r));
    gc();
  }
}

describe("parked runs hold no memory outside the store", () => {
  it("every parked attempt's fx can be collected once it parked; the runs still wake", async () => {
    const refs: Array<WeakRef<object>> = [];
    const woke: number[] = [];
    const sleeper = flow("park.sleeper", {
      durable: true,
      do: async ({ i }: { i: number }, fx) => {
        refs.push(new WeakRef(fx));
        await fx.step("before", () => i);
        await fx.clock.sleep("nap", "1h");
        await fx.step("after", () => woke.push(i));
      },
    });
    const time = createTimeTravel(1_000_000);
    const app = createApp({ modules: [{ sleeper }], env: "test", clock: time, store: createMemoryStore() });
    cleanups.push(() => app.stop({ timeoutMs: 2_000 }));
    await app.boot();
    for (let i = 0; i < 20; i++) expect(await app.invoke(sleeper, { i })).toBeUndefined();
    expect(refs).toHaveLength(20);
    await collect();
    expect(refs.filter((r) => r.deref() !== undefined)).toHaveLength(0);
    expect(await app.operator.sleepers()).toHaveLength(20);

    time.advance("1h");
    for (let n = 0; woke.length < 20 && n < 1_000; n++) await new Promise((r) => setImmediate(r));
    expect(woke.sort((a, b) => a - b)).toEqual(Array.from({ length: 20 }, (_, i) => i));
  });
});
