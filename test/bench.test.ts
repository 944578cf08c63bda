// The bench's own machinery: drains count distinct jobs, S10 rounds reuse their tables, apps log to stderr.
import { spawn } from "node:child_process";
import { PassThrough, Writable } from "node:stream";
import { afterEach, describe, expect, it, vi } from "vitest";
import { drain } from "../bench/compare/drain.ts";
import { dropLeftoverSchemas, dropRunSchemas, ensureDatabase, withClient } from "../bench/compare/env.ts";
import { benchLogger, forwardStderr, plannedFailuresWithheld } from "../bench/compare/logger.ts";
import { okengineSystem } from "../bench/compare/okengine.ts";
import { Progress } from "../bench/compare/progress.ts";
import {
  s10Session,
  type ProductionSizes,
  type S10Steps,
  type StateRun,
} from "../bench/compare/production.ts";
import { QUIET_LOAD, resultsPlace, startLoadNote } from "../bench/compare/report.ts";
import { benchRun, leftoverNames, randomName, runPidOf } from "../bench/compare/run-id.ts";
import { jobs, type Ctx } from "../bench/compare/scenario-kit.ts";
import type { Namespace, QueueOptions, QueueSystem, Sizes } from "../bench/compare/types.ts";
import { until } from "./conformance/app-fixture.ts";

/** A queue that calls the handler with the given job numbers, in order, once started. */
function scripted(calls: number[]): QueueSystem {
  return {
    id: "scripted",
    label: "scripted",
    backend: "memory",
    unsupported: {},
    describe: () => [],
    fresh: () => Promise.resolve({ name: "scripted" }),
    drop: () => Promise.resolve(),
    open: (_ns, o: QueueOptions) => {
      const handled = new Set<number>();
      return Promise.resolve({
        add: () => Promise.resolve(),
        addBulk: () => Promise.resolve(),
        start: async () => {
          for (const n of calls) {
            await o.handler({ n, j: 0, key: undefined, attempt: handled.has(n) ? 2 : 1 });
            handled.add(n);
          }
        },
        deadCount: () => Promise.resolve(0),
        remaining: () => Promise.resolve(3 - handled.size),
        close: () => Promise.resolve(),
      });
    },
  };
}

const ctx = (capSeconds: number): Ctx => ({
  sizes: { capSeconds } as Sizes,
  progress: new Progress(1),
});

/** What is written to process.stderr until the test ends (not passed on). */
function captureStderr(): string[] {
  const written: string[] = [];
  vi.spyOn(process.stderr, "write").mockImplementation((chunk: string | Uint8Array) => {
    written.push(String(chunk));
    return true;
  });
  return written;
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe("bench drain", () => {
  it("a duplicate handler call is not progress: it does not finish the drain and is reported", async () => {
    // Three jobs; job 0 runs twice and job 2 never: three calls, two jobs.
    const r = await drain(scripted([0, 0, 1]), ctx(0.05), jobs(3), {
      concurrency: 1,
      retries: 3,
      keyed: false,
    });
    expect(r).toMatchObject({ capped: true, ran: 2, duplicates: 1 });
  });

  it("every job handled, one of them twice: the drain finishes with all jobs and one duplicate", async () => {
    const r = await drain(scripted([0, 1, 0, 2]), ctx(5), jobs(3), {
      concurrency: 1,
      retries: 3,
      keyed: false,
    });
    expect(r).toMatchObject({ capped: false, ran: 3, duplicates: 1 });
  });
});

describe("bench logger", () => {
  it("writes warnings and errors, not info, and withholds the bench's planned failures", () => {
    const lines: Array<{ level: number; msg: string }> = [];
    const dest = new Writable({
      write(chunk: Buffer, _enc, done) {
        lines.push(JSON.parse(chunk.toString()) as { level: number; msg: string });
        done();
      },
    });
    const log = benchLogger(dest);
    const before = plannedFailuresWithheld();
    log.info("started");
    log.warn({ signal: "s" }, "attempt 1 failed: Error: boom");
    log.warn({ signal: "s" }, "attempt 1 failed: Error: bench: job 10 fails on purpose");
    log.error("store unavailable");
    expect(lines.map((l) => [l.level, l.msg])).toEqual([
      [40, "attempt 1 failed: Error: boom"],
      [50, "store unavailable"],
    ]);
    expect(plannedFailuresWithheld() - before).toBe(1);
  });

  it("an okengine bench app's failed attempt shows on stderr", async () => {
    const written = captureStderr();
    const system = okengineSystem("memory");
    const ns = await system.fresh();
    const attempts: number[] = [];
    const h = await system.open(ns, {
      concurrency: 1,
      retries: 1,
      keyed: false,
      handler: (c) => {
        attempts.push(c.attempt);
        if (c.attempt === 1) throw new Error(`job ${c.n} hit an unexpected error`);
      },
    });
    try {
      await h.start();
      await h.add({ n: 7 });
      await until(async () => attempts.length === 2 && (await h.remaining()) === 0, "retried and settled");
    } finally {
      await h.close();
      await system.drop(ns);
    }
    const records = written
      .filter((w) => w.startsWith("{"))
      .map((w) => JSON.parse(w) as { level: number; msg: string });
    expect(records).toContainEqual(
      expect.objectContaining({ level: 40, msg: "attempt 1 failed: job 7 hit an unexpected error" }),
    );
  });

  it("forwardStderr shows a child's lines and keeps only what is not a warning for its error", async () => {
    const shown = captureStderr();
    const child = new PassThrough();
    const tail = forwardStderr(child);
    child.write('{"level":40,"msg":"settle failed; retrying"}\nError: connect ECONN');
    child.write("REFUSED\n");
    await new Promise((r) => setImmediate(r));
    expect(shown.map((s) => s.replace("\r\x1b[K", ""))).toEqual([
      '{"level":40,"msg":"settle failed; retrying"}\n',
      "Error: connect ECONNREFUSED\n",
    ]);
    expect(tail()).toBe("Error: connect ECONNREFUSED\n");
  });
});

describe("bench S10 rounds", () => {
  /** A system whose schemas are names only, and S10 steps that log what they do and return set figures. */
  function fakeS10(runs: Record<string, StateRun[]>, failAt?: string) {
    const log: string[] = [];
    let made = 0;
    const system = {
      ...scripted([]),
      fresh: () => Promise.resolve({ name: `ns${++made}` }),
      drop: (ns: Namespace) => {
        log.push(`drop ${ns.name}`);
        return Promise.resolve();
      },
    };
    const state = (ns: Namespace): string => (Number(ns.name.slice(2)) % 2 === 1 ? "empty" : "big");
    const steps: S10Steps = {
      measure: async (ns, fill) => {
        const at = `measure ${state(ns)} ${ns.name}`;
        log.push(at);
        await fill?.();
        if (at === failAt) throw new Error("drain timed out");
        return runs[state(ns)]!.shift()!;
      },
      fill: (ns) => {
        log.push(`fill ${ns.name}`);
        return Promise.resolve();
      },
      sizes: () => Promise.resolve({ messages: "157 MB", indexes: "73 MB", runs: "83 MB" }),
      reset: (ns) => {
        log.push(`reset ${ns.name}`);
        return Promise.resolve();
      },
    };
    const ps = { bigMessages: 1_000, bigRuns: 200, bigDrain: 100, bigLatency: 5 } as ProductionSizes;
    return { log, session: s10Session(system, ps, steps), ctx: ctx(1) };
  }
  const run = (rate: number, p50: number): StateRun => ({ rate, p50, duplicates: 0 });

  it("every round measures both states beside each other on tables built once, and drops them after the last", async () => {
    const { log, session, ctx } = fakeS10({
      empty: [run(100, 1), run(200, 2), run(100, 4)],
      big: [run(80, 1.5), run(220, 2), run(90, 2)],
    });
    const rounds = [];
    for (let r = 0; r < 3; r++) rounds.push(await session.round(ctx, r, r === 2));
    expect(log).toEqual([
      "measure empty ns1",
      "reset ns1",
      "measure big ns2",
      "fill ns2",
      "reset ns2",
      // The second round starts with the big tables, on the same schemas, without a fill.
      "measure big ns2",
      "reset ns2",
      "measure empty ns1",
      "reset ns1",
      "measure empty ns1",
      "reset ns1",
      "measure big ns2",
      "reset ns2",
      "drop ns1",
      "drop ns2",
    ]);
    // One sample per round, big ÷ the empty beside it; run.ts takes their median.
    expect(rounds.map((figs) => figs.map((f) => f.samples))).toEqual([
      [[0.8], [1.5]],
      [[1.1], [1]],
      [[0.9], [0.5]],
    ]);
    expect(rounds[0]![0]!.note).toContain("before the drain: messages 157 MB");
    expect(rounds[1]![0]!.note).toBe("round 2 (big first, then empty): 220 vs 200 jobs/s");
  });

  it("a failed round drops both schemas, and the next one fills fresh ones", async () => {
    const { log, session, ctx } = fakeS10(
      { empty: [run(100, 1), run(100, 1)], big: [run(90, 1)] },
      "measure big ns2",
    );
    await expect(session.round(ctx, 0, false)).rejects.toThrow("drain timed out");
    const figs = await session.round(ctx, 1, true);
    expect(figs[0]!.samples).toEqual([0.9]);
    expect(log).toEqual([
      "measure empty ns1",
      "reset ns1",
      "measure big ns2",
      "fill ns2",
      "drop ns1",
      "drop ns2",
      "measure big ns4",
      "fill ns4",
      "reset ns4",
      "measure empty ns3",
      "reset ns3",
      "drop ns3",
      "drop ns4",
    ]);
  });
});

describe("bench results", () => {
  const date = "2026-12-01T21:08:05.414Z";

  it("only a full run that rewrites the README records bench/results/<date>.*", () => {
    expect(resultsPlace({ date, mode: "full" }, true)).toEqual({ dir: "results", stem: "2026-12-01" });
  });

  it("a second recorded run on one date is named by its time too, so the first is kept", () => {
    const taken = (stem: string): boolean => stem === "2026-12-01";
    expect(resultsPlace({ date, mode: "full" }, true, taken)).toEqual({
      dir: "results",
      stem: "2026-12-01T21-08",
    });
    expect(resultsPlace({ date: "2026-12-02T03:30:00.000Z", mode: "full" }, true, taken)).toEqual({
      dir: "results",
      stem: "2026-12-02",
    });
  });

  it("the machine line says the machine was busy only when the load at the start says so", () => {
    expect(startLoadNote([0.08, 0.2, 0.3])).toBe("the machine was otherwise idle when it started");
    expect(startLoadNote([QUIET_LOAD, 1, 1])).toBe("the machine was otherwise idle when it started");
    expect(startLoadNote([2.4, 1, 1])).toBe("other work was running when it started");
  });

  it("a quick run or --no-readme writes to the git-ignored scratch directory, never over a recorded result", () => {
    expect(resultsPlace({ date, mode: "quick" }, false)).toEqual({
      dir: "results/scratch",
      stem: "2026-12-01T21-08-05-quick",
    });
    expect(resultsPlace({ date, mode: "full" }, false)).toEqual({
      dir: "results/scratch",
      stem: "2026-12-01T21-08-05",
    });
  });
});

describe("bench run ids", () => {
  /** The pid of a process that has ended (a real one, started and waited for). */
  async function deadPid(): Promise<number> {
    const child = spawn(process.execPath, ["-e", ""], { stdio: "ignore" });
    await new Promise((resolve) => child.once("exit", resolve));
    return child.pid!;
  }

  it("names carry the run, and a child started with this environment names under the same run", async () => {
    const run = benchRun();
    expect(run).toMatch(/^r[0-9]+$/);
    expect(randomName("oke_bench_idem")).toMatch(new RegExp(`^oke_bench_idem_${run}_[0-9a-f]{8}$`));
    const child = spawn(
      process.execPath,
      [
        "--import",
        "tsx",
        "-e",
        `import("./bench/compare/run-id.ts").then((m) => process.stdout.write(m.randomName("gw_bench")))`,
      ],
      { stdio: ["ignore", "pipe", "inherit"] },
    );
    let out = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    await new Promise((resolve) => child.once("close", resolve));
    expect(out).toMatch(new RegExp(`^gw_bench_${run}_[0-9a-f]{8}$`));
    expect(runPidOf(out, ["gw_bench"])).toBe(process.pid);
  });

  it("a run starting drops the schemas of runs that are gone and of unnamed runs, never a live run's", async () => {
    const gone = await deadPid();
    const names = [
      `oke_benchtest_r${process.pid}_0000aaaa`,
      `oke_benchtest_s13_r${gone}_0000bbbb`,
      "oke_benchtest_0000cccc",
      "oke_benchtest_idem_4242",
    ];
    expect(runPidOf(names[0]!, ["oke_benchtest"])).toBe(process.pid);
    expect(runPidOf(names[1]!, ["oke_benchtest"])).toBe(gone);
    expect(runPidOf(names[2]!, ["oke_benchtest"])).toBeUndefined();
    expect(leftoverNames(names, ["oke_benchtest"])).toEqual(names.slice(1));

    // The same against PostgreSQL: the bench database's schemas under a prefix of this test's own.
    await ensureDatabase();
    await withClient(async (c) => {
      for (const n of names) await c.query(`CREATE SCHEMA IF NOT EXISTS "${n}"`);
    });
    try {
      expect(await dropLeftoverSchemas(["oke_benchtest"])).toBe(3);
      const left = await withClient(
        async (c) =>
          (
            await c.query<{ n: string }>(
              "SELECT nspname AS n FROM pg_namespace WHERE nspname LIKE 'oke\\_benchtest\\_%'",
            )
          ).rows,
      );
      expect(left.map((r) => r.n)).toEqual([names[0]]);
      expect(await dropRunSchemas(["oke_benchtest"])).toBe(1);
    } finally {
      await withClient(async (c) => {
        for (const n of names) await c.query(`DROP SCHEMA IF EXISTS "${n}" CASCADE`);
      });
    }
  });
});
