// `oke terminate` in-process against a real app's Console: what it prints, what --json gives, and exit 1 with the Console's reason on a refusal.
import { afterAll, describe, expect, it } from "vitest";
import { createApp } from "../app/app.ts";
import { flow, on, signal } from "../index.ts";
import { createTimeTravel } from "../clock/time-travel.ts";
import { createMemoryStore } from "../store/memory/memory-store.ts";
import { oke, type Ran } from "./run-oke.test-helper.ts";

const TOKEN = "alice-secret-0123456789";
const napper = flow("cli.napper", {
  durable: true,
  do: async (_: { n: number }, fx) => {
    await fx.clock.sleep("nap", "1h");
  },
});

const jobs = signal.once("cli.jobs");
const worker = on(
  jobs,
  flow("cli.worker", {
    durable: true,
    do: async (_: { n: number }, fx) => {
      await fx.clock.sleep("wait", "1h");
    },
  }),
);

describe("oke terminate", () => {
  const stops: Array<() => Promise<void>> = [];
  afterAll(async () => {
    while (stops.length > 0) await stops.pop()!();
  });

  it("ends a sleeping run (failed, OKE1339 with the reason); a refusal is exit 1 with the Console's message", async () => {
    const now = Date.UTC(2026, 11, 1, 12);
    const time = createTimeTravel(now);
    const store = createMemoryStore();
    const app = createApp({
      modules: [{ napper, jobs, worker }],
      env: "test",
      clock: time,
      store,
      config: { console: { port: 0, tokens: { alice: TOKEN } } },
    });
    stops.push(() => app.stop({ timeoutMs: 2_000 }));
    const url = (await app.start({ port: 0, host: "127.0.0.1" })).console!.url;
    const cli = (...args: string[]): Promise<Ran> => oke(...args, "--url", url, "--token", TOKEN);
    // A durable consumer's parked run: the line says what became of its message.
    await app.emit(jobs, { n: 0 });
    await app.idle();
    const [consumer] = (await store.listRuns({ flow: "cli.worker", status: "sleeping" })).map((r) => r.id);
    const ended = await cli("terminate", consumer!);
    expect([ended.code, ended.stderr]).toEqual([0, ""]);
    expect(ended.stdout).toBe(
      `terminated ${consumer}: failed with OKE1339 (terminated by alice at 2026-12-01T12:00:00.000Z); its undos did not run\n` +
        `its message ${consumer} on cli.jobs is now a dead letter: oke replay cli.jobs ${consumer} runs its work afresh`,
    );
    await app.invoke(napper, { n: 1 });
    await app.invoke(napper, { n: 2 });
    await app.idle();
    const [a, b] = (await store.listRuns({ flow: "cli.napper", status: "sleeping" })).map((r) => r.id);

    const done = await cli("terminate", a!, "--reason", "flow retired");
    expect([done.code, done.stderr]).toEqual([0, ""]);
    expect(done.stdout).toBe(
      `terminated ${a}: failed with OKE1339 (terminated by alice at 2026-12-01T12:00:00.000Z: flow retired); its undos did not run`,
    );
    expect(await store.getRun(a!)).toMatchObject({ status: "failed", error: { code: "OKE1339" } });

    const json = await cli("terminate", b!, "--json");
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout)).toMatchObject({
      outcome: "terminated",
      run: {
        id: b,
        status: "failed",
        error: { code: "OKE1339", message: "terminated by alice at 2026-12-01T12:00:00.000Z" },
      },
    });

    const again = await cli("terminate", a!);
    expect([again.code, again.stdout]).toEqual([1, ""]);
    expect(again.stderr).toBe(
      `oke: the Console refused: run "${a}" is already failed: there is nothing to terminate (409 OKE1611)`,
    );

    await store.startRun({
      id: "busy",
      flow: "cli.gone",
      input: 1,
      parentRunId: null,
      owner: "i/2",
      now,
      leaseMs: 60_000,
    });
    const held = await cli("terminate", "busy");
    expect(held.code).toBe(1);
    expect(held.stderr).toContain(
      `oke: the Console refused: run "busy" is held by i/2, whose lease lapses at 2026-12-01T12:01:00.000Z`,
    );
    expect(await store.getRun("busy")).toMatchObject({ status: "running", leaseOwner: "i/2" });

    const missing = await cli("terminate", "nope");
    expect(missing.code).toBe(1);
    expect(missing.stderr).toBe(`oke: no run "nope" (404 OKE1606)`);
  });
});
