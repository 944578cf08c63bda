// A durable run held back by a deploy (OKE1301), for the tests of what operators see and do about one.
import { createApp } from "../../src/app/app.ts";
import type { TimeTravel } from "../../src/clock/time-travel.ts";
import { flow } from "../../src/index.ts";
import type { Store } from "../../src/store/types.ts";

/**
 * A flow a deploy changes under its sleeping runs: version `heldTrial("a")` journals step "a" where
 * `heldTrial("b")` asks for "b", so an app with the second holds a run of the first back when it
 * wakes, one minute after it started.
 */
export const heldTrial = (first: string) =>
  flow("trials.held", {
    durable: true,
    do: async (_: { n: number }, fx) => {
      await fx.step(first, () => 1);
      await fx.clock.sleep("trial-end", "1m");
    },
  });

/**
 * The previous version of the code (`heldTrial("a")`) starts one run on `store` and stops; the run
 * sleeps until a minute past `time`'s now. Resolves with its id.
 */
export async function startedByPreviousVersion(store: Store, time: TimeTravel): Promise<string> {
  const then = heldTrial("a");
  const previous = createApp({ modules: [{ then }], env: "test", clock: time, store });
  await previous.start({ port: 0, host: "127.0.0.1" });
  await previous.invoke(then, { n: 1 });
  await previous.stop();
  const run = (await store.listRuns({ flow: "trials.held", status: "sleeping" }))[0];
  if (run === undefined) throw new Error("the previous version's run is not sleeping");
  return run.id;
}
