// ReplayJobs.stopAll: no batch goes out after it, a batch out at stop ends the job once (stopped), and settled() waits for it.
import { describe, expect, it } from "vitest";
import { gate, until } from "../../test/conformance/app-fixture.ts";
import { createTimeTravel } from "../clock/time-travel.ts";
import type { ConsoleHost } from "./host.ts";
import { ReplayJobs, type ReplayJob } from "./replay-jobs.ts";

/** A Console host whose operator's replay of batch `n` (1-based) waits for `hold(n)`; it records every batch. */
function host(hold: (n: number) => Promise<void> = () => Promise.resolve()) {
  const time = createTimeTravel(0);
  const batches: string[][] = [];
  const fake = {
    clock: time,
    operator: {
      async replay(_signal: string, ids: string[]): Promise<string[]> {
        batches.push(ids);
        await hold(batches.length);
        return ids;
      },
    },
  } as unknown as ConsoleHost;
  return { host: fake, time, batches };
}

describe("ReplayJobs.stopAll", () => {
  it("a batch out at stop that then fails (the store closing) leaves the job stopped, ended once; settled() waits for it", async () => {
    const held = gate();
    let waiting = false;
    const {
      host: h,
      time,
      batches,
    } = host(async (n) => {
      if (n === 1) {
        waiting = true;
        await held.promise;
        throw new Error("store closed");
      }
    });
    const ended: ReplayJob[] = [];
    const jobs = new ReplayJobs(h, (job) => ended.push(job));
    jobs.start("s", ["a", "b", "c"], 1, "op");
    await until(() => waiting, "the first batch");
    jobs.stopAll();
    let settled = false;
    const settling = jobs.settled().then(() => (settled = true));
    await new Promise((r) => setImmediate(r));
    const settledBeforeTheAnswer = settled;
    held.open();
    await settling;
    time.advance("10s");
    await new Promise((r) => setImmediate(r));

    expect(ended.map((j) => j.state)).toEqual(["stopped"]);
    expect(jobs.list()[0]).toMatchObject({ state: "stopped", nextAt: null });
    expect(batches).toEqual([["a"]]);
    expect(settledBeforeTheAnswer).toBe(false);
  });

  it("a batch out at stop that lands arms no next batch", async () => {
    const held = gate();
    let waiting = false;
    const {
      host: h,
      time,
      batches,
    } = host(async (n) => {
      if (n === 2) {
        waiting = true;
        await held.promise;
      }
    });
    const ended: ReplayJob[] = [];
    const jobs = new ReplayJobs(h, (job) => ended.push(job));
    jobs.start("s", ["a", "b", "c", "d"], 1, "op");
    await until(() => jobs.list()[0]!.nextAt !== null, "the second batch armed");
    time.advance("1s");
    await until(() => waiting, "the second batch");
    jobs.stopAll();
    held.open();
    await jobs.settled();
    time.advance("10s");
    await new Promise((r) => setImmediate(r));

    expect(batches).toEqual([["a"], ["b"]]);
    expect(jobs.list()[0]).toMatchObject({ state: "stopped", replayed: 2, nextAt: null });
    expect(ended.map((j) => j.state)).toEqual(["stopped"]);
  });
});

describe("ReplayJobs.list", () => {
  it("keeps the newest 20 finished jobs even when a long job still runs at the head of the list", async () => {
    const { host: h, time } = host();
    const jobs = new ReplayJobs(h, () => undefined);
    // One an hour over 1 000 messages: it runs for weeks and stays first in the list.
    jobs.start(
      "s",
      Array.from({ length: 1_000 }, (_, i) => `slow${i}`),
      1 / 3600,
      "op",
    );
    for (let i = 0; i < 30; i++) {
      jobs.start("s", [`m${i}`], 1, "op");
      time.advance("1s");
      await until(() => jobs.list().at(-1)!.state === "done", `job ${i} done`);
    }
    const list = jobs.list();
    expect(list[0]).toMatchObject({ total: 1_000, state: "running" });
    // Trimmed at each start to 20 finished; the last one started has finished since.
    expect(list.filter((j) => j.state === "done")).toHaveLength(21);
    expect(list).toHaveLength(22);
    jobs.stopAll();
  });
});
