/**
 * `npm run bench` — okengine against graphile-worker, pg-boss, BullMQ and
 * DBOS, every scenario of bench/README.md on the local PostgreSQL (and Redis
 * for BullMQ), one measurement after another. Full mode runs each S1–S6 and S9 measurement in a fresh
 * child process after a warm-up pass (compare/isolated.ts); the rest run in this process.
 *
 *   npm run bench                      full mode (~27 min, 3 rounds, medians; rewrites its bench/README.md section
 *                                      and records bench/results/<date>.json and .md)
 *   npm run bench -- --quick           about 2 min, 1 round, small sizes (bench/README.md and bench/results/<date>.*
 *                                      untouched: results go to bench/results/scratch/, git-ignored; so with --no-readme)
 *   npm run bench -- --only=S3,S4 --systems=okengine-postgres,graphile-worker --repeats=5 --no-readme
 *   --isolate / --in-process           force or skip the child process per S1–S6 and S9 measurement
 *
 * Peers live only in bench/package.json; they are installed on first use.
 * Env: BENCH_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/okengine_bench, created if
 * missing), BENCH_REDIS_HOST / BENCH_REDIS_PORT (127.0.0.1:6379).
 */
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { loadavg } from "node:os";
import { fileURLToPath } from "node:url";

const here = (p: string): string => fileURLToPath(new URL(p, import.meta.url));
const args = process.argv.slice(2);
const flag = (name: string): string | undefined =>
  args.find((a) => a.startsWith(`--${name}=`))?.split("=")[1];

if (!existsSync(here("./node_modules"))) {
  console.error("bench: installing the peer systems into bench/node_modules (npm install --prefix bench) …");
  const r = spawnSync("npm", ["install", "--prefix", here("."), "--no-audit", "--no-fund"], {
    stdio: "inherit",
  });
  if (r.status !== 0) process.exit(r.status ?? 1);
}

// Imported after the install so that a missing peer is installed before anything loads.
const { DATABASE_URL, describeMachine, dropLeftoverSchemas, dropRunSchemas, ensureDatabase, median } =
  await import("./compare/env.ts");
// This process's run id, set in the environment before any child starts, so children name their
// schemas under it (compare/run-id.ts).
(await import("./compare/run-id.ts")).benchRun();
const { dbosWorkflows } = await import("./compare/dbos.ts");
const { okengineWorkflows } = await import("./compare/okengine-workflows.ts");
const { Progress } = await import("./compare/progress.ts");
const report = await import("./compare/report.ts");
const { QUEUE_SCENARIOS } = await import("./compare/queue-scenarios.ts");
const { runIsolated } = await import("./compare/isolated.ts");
const { queueSystems, queueSystem, REFERENCE } = await import("./compare/systems.ts");
const { s9 } = await import("./compare/workflows.ts");
const { s14, s15, s16, s16Bullmq, s16Graphile } = await import("./compare/fanout.ts");
const { s10Session, s11, s12, s12Poll, productionSizes } = await import("./compare/production.ts");
const { s13, S13_DRIVERS } = await import("./compare/sleepers.ts");
type Figure = import("./compare/types.ts").Figure;
type ScenarioId = import("./compare/types.ts").ScenarioId;
type Sizes = import("./compare/types.ts").Sizes;

const quick = args.includes("--quick");
const sizes: Sizes = quick
  ? {
      s1: 300,
      s2: 2_000,
      s3: 10_000,
      s4: 200,
      s5Keys: 100,
      s5PerKey: 20,
      s5Drains: 1,
      s6: 500,
      s6Retries: 1,
      s7Jobs: 40,
      // Enough for every peer that recovers a killed worker's job at all (BullMQ's stall check is the slowest).
      s7WaitSeconds: 5,
      s9: 200,
      s9Sleeps: 20,
      s14Events: 100,
      s15Streams: 1_000,
      s15Emits: 10,
      s16Seconds: 10,
      s16Clocks: 20,
      s16Instances: 3,
      s16Rounds: 1,
      s16CronMinutes: 0,
      s13Runs: 100_000,
      s13Due: 10_000,
      capSeconds: 2,
      latencyCapSeconds: 2,
      repeats: 1,
    }
  : {
      s1: 2_000,
      s2: 100_000,
      s3: 100_000,
      s4: 1_000,
      s5Keys: 1_000,
      s5PerKey: 50,
      s5Drains: 3,
      s6: 2_000,
      s6Retries: 2,
      s7Jobs: 200,
      s7WaitSeconds: 15,
      s9: 2_000,
      s9Sleeps: 100,
      s14Events: 500,
      s15Streams: 10_000,
      s15Emits: 50,
      s16Seconds: 40,
      s16Clocks: 100,
      s16Instances: 3,
      s16Rounds: 3,
      s16CronMinutes: 3,
      s13Runs: 1_000_000,
      s13Due: 100_000,
      capSeconds: 10,
      latencyCapSeconds: 15,
      repeats: 3,
    };
if (flag("repeats")) sizes.repeats = Number(flag("repeats"));
const only = flag("only")?.split(",") as ScenarioId[] | undefined;
const pick = flag("systems")?.split(",");

const versionOf = (pkg: string): string => {
  try {
    return (
      JSON.parse(readFileSync(here(`./node_modules/${pkg}/package.json`), "utf8")) as { version: string }
    ).version;
  } catch {
    return "not installed";
  }
};
const versions = Object.fromEntries(
  ["graphile-worker", "pg-boss", "bullmq", "ioredis", "@dbos-inc/dbos-sdk"].map((p) => [p, versionOf(p)]),
);

// DBOS's pg client prints a deprecation warning that would break the progress lines.
process.noDeprecation = true;
// okengine's timers are unref'd (a server keeps the process alive); this bench process has no server.
const keepAlive = setInterval(() => undefined, 1_000);

const queue = queueSystems().filter((s) => !pick || pick.includes(s.id));
const workflows = [
  okengineWorkflows("memory"),
  okengineWorkflows("file"),
  okengineWorkflows("postgres"),
  dbosWorkflows(versions["@dbos-inc/dbos-sdk"]!),
].filter((s) => !pick || pick.includes(s.id));
// Full mode runs each S1–S6 and S9 measurement in a fresh process after a warm-up pass (compare/isolated.ts):
// in one long-lived process a figure depended on the heap and JIT state earlier scenarios left.
// --quick stays in-process (a child per measurement would add ~40 s); --isolate / --in-process override.
const isolate = args.includes("--isolate") || (!quick && !args.includes("--in-process"));
const wanted = (id: ScenarioId): boolean => !only || only.includes(id);

// Repeats are rounds over every system (not back-to-back runs of one system), so a burst of load from
// elsewhere on the machine lands on one sample of several systems rather than on every sample of one.
const rounds = sizes.repeats;
const once: Sizes = { ...sizes, repeats: 1 };
// `run` gets the round (0-based): S10 keeps its tables from one round to the next.
type Step = {
  scenario: ScenarioId;
  system: string;
  run: (round: number) => Promise<Figure[]>;
  skip?: string;
};
const steps: Step[] = [];
for (const [id, fn] of Object.entries(QUEUE_SCENARIOS) as Array<
  [keyof typeof QUEUE_SCENARIOS, (typeof QUEUE_SCENARIOS)[keyof typeof QUEUE_SCENARIOS]]
>) {
  if (!wanted(id)) continue;
  for (const system of queue) {
    if (system.only && !system.only.includes(id)) continue;
    // S2 is where the store-bulk variant differs; S1 would only repeat okengine (postgres).
    steps.push({
      scenario: id,
      system: system.id,
      run: () =>
        isolate && id !== "S7"
          ? runIsolated({ scenario: id, system: system.id, sizes: once }, { sizes: once, progress })
          : fn(system, { sizes: once, progress }),
      ...(system.unsupported[id] ? { skip: system.unsupported[id] } : {}),
    });
  }
}
if (wanted("S9"))
  for (const w of workflows)
    steps.push({
      scenario: "S9",
      system: w.id,
      run: () =>
        isolate
          ? runIsolated({ scenario: "S9", system: w.id, sizes: once }, { sizes: once, progress })
          : s9(w, { sizes: once, progress }),
    });
// S14–S16 run the stand-alone scripts (bench/broadcast-latency.ts, sse-streams.ts, clock-lag.ts) as
// child processes; S16 also measures graphile-worker's crontab (full mode: it fires once a minute).
const ctxOnce = {
  sizes: once,
  get progress() {
    return progress;
  },
};
const okenginePicked = !pick || pick.includes("okengine-postgres");
if (wanted("S14") && okenginePicked)
  steps.push({ scenario: "S14", system: "okengine-postgres", run: () => s14(ctxOnce) });
if (wanted("S15") && okenginePicked)
  steps.push({ scenario: "S15", system: "okengine-postgres", run: () => s15(ctxOnce) });
if (wanted("S16") && okenginePicked)
  steps.push({ scenario: "S16", system: "okengine-postgres", run: () => s16(ctxOnce) });
if (wanted("S16") && (!pick || pick.includes("bullmq")))
  steps.push({ scenario: "S16", system: "bullmq", run: () => s16Bullmq(ctxOnce) });
if (wanted("S16") && (!pick || pick.includes("graphile-worker")))
  steps.push({ scenario: "S16", system: "graphile-worker", run: () => s16Graphile(ctxOnce) });
// S10–S12 (issue 17's big tables, held snapshot, idle cost): PostgreSQL systems only; S10 is okengine's
// own (the peers delete or archive finished jobs), S11 and S12 run okengine, graphile-worker and pg-boss.
// S10 runs in every round on tables built in its first (compare/production.ts s10Session says why), and
// drops them after its last.
const ps = productionSizes(quick);
const pgPeers = ["okengine-postgres", "graphile-worker", "pg-boss"].filter(
  (id) => !pick || pick.includes(id),
);
const s10 = wanted("S10") && okenginePicked ? s10Session(queueSystem("okengine-postgres"), ps) : undefined;
if (s10)
  steps.push({
    scenario: "S10",
    system: "okengine-postgres",
    run: (round) => s10.round(ctxOnce, round, round === rounds - 1),
  });
if (wanted("S11"))
  for (const id of pgPeers)
    steps.push({ scenario: "S11", system: id, run: () => s11(queueSystem(id), ctxOnce, ps) });
if (wanted("S12")) {
  for (const id of pgPeers)
    steps.push({ scenario: "S12", system: id, run: () => s12(queueSystem(id), ctxOnce, ps) });
  if (okenginePicked)
    steps.push({
      scenario: "S12",
      system: "okengine-postgres",
      run: () => s12Poll(queueSystem("okengine-postgres"), ctxOnce, ps),
    });
}
if (wanted("S13"))
  for (const d of S13_DRIVERS)
    if (!pick || pick.includes(`okengine-${d}`))
      steps.push({ scenario: "S13", system: `okengine-${d}`, run: async () => s13(d, once) });
// S7 (child processes, a kill, a fixed wait), S15, S16, S13 (a million seeded runs per driver), S11 and S12
// (long or heavy) run in the first round only.
const FIRST_ROUND_ONLY = new Set<ScenarioId>(["S7", "S15", "S16", "S13", "S11", "S12"]);
const plan = Array.from({ length: rounds }, (_, r) =>
  steps
    .filter((s) => r === 0 || (!FIRST_ROUND_ONLY.has(s.scenario) && !s.skip))
    .map((s) => ({ ...s, round: r })),
).flat();

const progress = new Progress(plan.length);
const started = performance.now();
await ensureDatabase();
const SCHEMA_PREFIXES = ["oke_bench", "gw_bench", "pgboss_bench", "dbos_bench"];
const leftovers = await dropLeftoverSchemas(SCHEMA_PREFIXES);
// Stopped mid-measurement (Ctrl-C reaches the children too): this run's schemas go now, not at the
// next run's start.
for (const [signal, code] of [
  ["SIGINT", 130],
  ["SIGTERM", 143],
] as const)
  process.once(signal, () => {
    void dropRunSchemas(SCHEMA_PREFIXES)
      .catch((e: unknown) => console.error(`bench: dropping this run's schemas failed: ${String(e)}`))
      .finally(() => process.exit(code));
  });
const machine = await describeMachine();
progress.note(
  `bench ${quick ? "quick" : "full"}: ${plan.length} measurements (${rounds} round(s)); ${machine.cpus} cores, node ${machine.node}, PostgreSQL ${machine.postgres} ` +
    `(synchronous_commit ${machine.postgresSettings.synchronous_commit}) at ${DATABASE_URL.replace(/\/\/[^@]*@/, "//")}; Redis ${machine.redis}` +
    (leftovers ? `; dropped ${leftovers} schemas left by runs that are gone` : ""),
);

const raw: Figure[] = [];
for (const step of plan) {
  progress.begin(
    `${step.scenario} ${step.system}${rounds > 1 ? ` (round ${step.round + 1}/${rounds})` : ""}`,
  );
  if (step.skip) {
    raw.push({
      scenario: step.scenario,
      metric: "(n/a)",
      unit: "",
      better: "higher",
      system: step.system,
      value: null,
      samples: [],
      note: step.skip,
    });
    progress.end(`n/a — ${step.skip}`);
    continue;
  }
  try {
    const got = await step.run(step.round);
    raw.push(...got);
    progress.end(
      got
        .map(
          (f) =>
            `${f.metric}: ${f.value === null ? "n/a" : `${f.value.toFixed(f.unit === "jobs/s" || f.unit === "wf/s" ? 0 : 2)} ${f.unit}`}`,
        )
        .join(" · "),
    );
  } catch (e) {
    const message = e instanceof Error ? e.message : String(e);
    raw.push({
      scenario: step.scenario,
      metric: "(error)",
      unit: "",
      better: "higher",
      system: step.system,
      value: null,
      samples: [],
      note: `error: ${message.slice(0, 300)}`,
    });
    progress.end(`FAILED: ${message.slice(0, 200)}`);
  }
}
clearInterval(keepAlive);

// One figure per (scenario, metric, system): the median over the rounds, every round's value kept.
const figures: Figure[] = [];
for (const f of raw) {
  const same = figures.find(
    (g) => g.scenario === f.scenario && g.metric === f.metric && g.system === f.system,
  );
  if (!same) {
    figures.push({ ...f, samples: [...f.samples] });
    continue;
  }
  same.samples.push(...f.samples);
  same.value = same.samples.length ? median(same.samples) : null;
  if (f.note && !(same.note ?? "").includes(f.note))
    same.note = same.note ? `${same.note}; ${f.note}` : f.note;
  if (f.checks) same.checks = { ...same.checks, ...f.checks };
}

// n/a rows carry a placeholder metric: give them every metric of their scenario so the tables line up.
const filled: Figure[] = [];
for (const f of figures) {
  if (f.value !== null || (f.metric !== "(n/a)" && f.metric !== "(error)")) {
    filled.push(f);
    continue;
  }
  const metrics = [
    ...new Set(
      figures.filter((g) => g.scenario === f.scenario && !g.metric.startsWith("(")).map((g) => g.metric),
    ),
  ];
  for (const metric of metrics.length ? metrics : [f.metric]) {
    const like = figures.find((g) => g.scenario === f.scenario && g.metric === metric);
    filled.push({ ...f, metric, unit: like?.unit ?? "", better: like?.better ?? "higher" });
  }
}

const all = [...queue, ...workflows.filter((w) => !queue.some((q) => q.id === w.id))];
const result: import("./compare/report.ts").RunResult = {
  date: new Date().toISOString(),
  mode: quick ? "quick" : "full",
  seconds: (performance.now() - started) / 1_000,
  machine,
  versions,
  sizes,
  reference: REFERENCE,
  systems: all.map((s) => {
    const w = workflows.find((x) => x.id === s.id);
    const q = queue.find((x) => x.id === s.id);
    const crash = q?.crashNote && !q.unsupported.S7 && !q.only ? [`S7: ${q.crashNote}`] : [];
    return {
      id: s.id,
      label: s.label,
      config: [...(q?.describe() ?? []), ...crash, ...(w ? w.describe().map((l) => `S9: ${l}`) : [])],
    };
  }),
  figures: filled,
  notes: [
    `${isolate ? "Each S1–S6 and S9 measurement runs in a fresh Node process after an unmeasured warm-up pass of the same scenario at a tenth of its size (the heap and JIT state left by earlier scenarios moved figures by 2×); the other scenarios run in the bench process, one after another" : "One process runs every measurement in turn"}; each measurement gets a fresh namespace (PostgreSQL schema in the bench database, temp directory, or Redis key prefix) that is dropped afterwards.`,
    "Durability: PostgreSQL with synchronous_commit and fsync as listed above for okengine, graphile-worker, pg-boss and DBOS; the okengine file driver fdatasyncs before a call resolves; BullMQ's durability is the Redis persistence listed above.",
    `Throughput scenarios stop after ${sizes.capSeconds} s and report the rate so far (marked "capped"); S4 takes samples for at most ${sizes.latencyCapSeconds} s per run.`,
    "S3/S5: jobs are preloaded with each system's fastest batch call (untimed); the clock runs from the first handler start until the store reports every job settled (polled every 10 ms: okengine stats pending + inflight, graphile jobs left, pg-boss state < completed, BullMQ waiting + active + delayed), so batched completion is included. Progress is distinct jobs handled: a job handled twice (a redelivery) counts once and is noted as a duplicate.",
    "S4: producer and workers in one process, the system idle, the concurrency-32 configuration; the next job is enqueued as soon as the previous handler started.",
    `S7: two worker processes (concurrency ${4} each, jobs of 200 ms); A is SIGKILLed once it has started a quarter of the jobs; the figure is kill → the last of A's in-flight jobs starting again in B. The okengine file driver allows one process per directory, so B starts after the kill (the figure includes B's boot).`,
    "S9: workflows called in-process (okengine app.invoke, DBOS direct call); the sleep figure is the delay past the due time.",
    "S14–S16 run bench/broadcast-latency.ts, bench/sse-streams.ts and bench/clock-lag.ts as child processes on the bench database (their own schemas, dropped after); S14/S15 are okengine only. S16 (first round only): okengine's lag is handler start − slot over 3 app processes, the median of s16Rounds rounds of its own (3 in full mode; one instance fires a second's slots in one statement, so a round's p99 is its worst second); BullMQ's is job start − the due time in its scheduler job id for job schedulers { every: 1000 } on 3 workers in one process; graphile-worker's is task start − `_cron.ts` for crontab entries `* * * * *` on 3 runners in one process, full mode only (it fires once a minute).",
    `S13: bench/sleepers.ts per driver in its own process: ${sizes.s13Runs} runs parked on a 30-day sleep after one step (seeded through the engine / one INSERT … SELECT, not timed), ${sizes.s13Due} of them overdue; boot is createApp + boot() until ready (file: recovery of journal.json included); memory is heapUsed / RSS after gc, after the due runs finished, minus before the store opened, per run; resume is boot → the last due run finished, at durable.concurrency 32. First round only.`,
    `The machine has ${machine.cpus} cores shared by Node, PostgreSQL and Redis; ${report.startLoadNote(machine.loadAtStart)} (load average ${machine.loadAtStart.join(" / ")} at the start, ${loadavg()
      .map((l) => l.toFixed(2))
      .join(
        " / ",
      )} at the end): expect noise. Repeats are rounds over all systems; each figure is the median of its rounds.`,
  ],
};

// Quick figures are too rough for the README: only a full run (without --no-readme) rewrites its section,
// and only that run records bench/results/<date>.*; the others go to bench/results/scratch/ (git-ignored).
const readme = !quick && !args.includes("--no-readme");
const saved = await report.saveRun(result, readme, here("."));
console.log(report.consoleTable(result));
console.log("");
for (const t of report.targets(result))
  console.log(`${t.ok === null ? "·" : t.ok ? "✓" : "✗"} ${t.what}: ${t.detail}`);
console.log(
  `\nwrote bench/${saved.dir}/${saved.json} and bench/${saved.dir}/${saved.md}${readme ? "; updated bench/README.md" : ""}`,
);
process.exit(0);
