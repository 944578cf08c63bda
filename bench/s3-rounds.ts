/**
 * S3's drain (bench/compare/drain.ts: preload, boot, first handler → all settled) through the same
 * okengine harness, several rounds in one process, with what a rate alone hides: Node CPU per job,
 * GC pauses, heap, and (postgres) statements per job counted at the client. Rounds differing in one
 * process (issue 17: memory 270k in round 1, 147k median) show up here round by round.
 *
 *   node --import tsx bench/s3-rounds.ts [--driver=memory|postgres] [--n=100000] [--rounds=5] [--concurrency=32] [--idle=ms]
 *
 * Bytes allocated per job (load-independent): give the young generation room for a whole round so no
 * GC runs in it, and the heap's growth is what the round allocated —
 *   node --min-semi-space-size=256 --max-semi-space-size=256 --import tsx bench/s3-rounds.ts --n=20000
 * (printed only for a round in which no GC ran). `--alloc-profile=FILE` samples every allocation of
 * the last round (collected ones included) into a .heapprofile for Chrome DevTools or a script.
 */
import { constants as perfConstants, performance as perf, PerformanceObserver } from "node:perf_hooks";
import { Session } from "node:inspector/promises";
import { writeFileSync } from "node:fs";
import { getHeapSpaceStatistics } from "node:v8";
import { createRequire } from "node:module";
import type pgTypes from "pg";
import type { JournalDriverName } from "../src/index.ts";
import { ensureDatabase, signalled, sleep, until } from "./compare/env.ts";
import { okengineSystem } from "./compare/okengine.ts";

// The root package's pg (the one src/ loads), not bench/node_modules' copy.
const pg = createRequire(new URL("../package.json", import.meta.url))("pg") as typeof pgTypes;
import { jobs } from "./compare/scenario-kit.ts";

const arg = (name: string, def: string): string =>
  process.argv.find((a) => a.startsWith(`--${name}=`))?.split("=")[1] ?? def;
const driver = arg("driver", "memory") as JournalDriverName;
const n = Number(arg("n", "100000"));
const rounds = Number(arg("rounds", "5"));
const concurrency = Number(arg("concurrency", "32"));
// Idle time between rounds (ms): the full bench has long waits between two S3 runs (S7, S11, S12), in
// which V8's memory reducer may shrink the young generation.
const idleMs = Number(arg("idle", "0"));
const allocProfile = arg("alloc-profile", "");
const newSpaceKB = (): number =>
  Math.round((getHeapSpaceStatistics().find((s) => s.space_name === "new_space")?.space_size ?? 0) / 1024);

let gcMs = 0;
let gcs = 0;
let majors = 0;
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) {
    gcMs += e.duration;
    gcs++;
    const kind = (e as { detail?: { kind?: number } }).detail?.kind;
    if (kind === perfConstants.NODE_PERFORMANCE_GC_MAJOR) majors++;
  }
}).observe({ entryTypes: ["gc"] });

// Statements sent, counted at the client (the root package's pg, which src/ loads).
let statements = 0;
// eslint-disable-next-line @typescript-eslint/unbound-method -- patched and called with apply(this)
const query = pg.Client.prototype.query as (...a: unknown[]) => unknown;
pg.Client.prototype.query = function (this: pgTypes.Client, ...a: unknown[]) {
  statements++;
  return query.apply(this, a);
} as typeof pg.Client.prototype.query;

if (driver === "postgres") await ensureDatabase();
const keepAlive = setInterval(() => undefined, 1_000);
const system = okengineSystem(driver);
const all = jobs(n);
console.log(`S3 rounds: ${driver}, ${n} jobs, concurrency ${concurrency}, node ${process.version}`);
for (let r = 1; r <= rounds; r++) {
  if (r > 1 && idleMs > 0) await sleep(idleMs);
  const ns = await system.fresh();
  let done = 0;
  let t0 = 0;
  const finished = signalled();
  const h = await system.open(ns, {
    concurrency,
    retries: 3,
    keyed: false,
    handler: () => {
      if (done === 0) t0 = performance.now();
      if (++done === n) finished.resolve();
    },
  });
  for (let i = 0; i < n; i += 1_000) await h.preload!(all.slice(i, i + 1_000));
  await sleep(50);
  // With --expose-gc: each round starts from a collected heap, and the live heap left by the rounds before shows.
  const collect = (globalThis as { gc?: () => void }).gc;
  collect?.();
  const liveBefore = process.memoryUsage().heapUsed;
  const gc0 = gcMs;
  const gcs0 = gcs;
  const majors0 = majors;
  const newSpace0 = newSpaceKB();
  const elu0 = perf.eventLoopUtilization();
  const st0 = statements;
  const profiling = allocProfile !== "" && r === rounds ? new Session() : undefined;
  if (profiling) {
    profiling.connect();
    await profiling.post("HeapProfiler.startSampling", {
      samplingInterval: 256,
      includeObjectsCollectedByMajorGC: true,
      includeObjectsCollectedByMinorGC: true,
    });
  }
  const cpu0 = process.cpuUsage();
  await h.start();
  await finished.promise;
  await until(async () => (await h.remaining()) === 0, 60_000, 10);
  const ms = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  const elu = perf.eventLoopUtilization(elu0).utilization;
  const heap = process.memoryUsage().heapUsed;
  if (profiling) {
    const { profile } = await profiling.post("HeapProfiler.stopSampling");
    writeFileSync(allocProfile, JSON.stringify(profile));
    profiling.disconnect();
  }
  const allocated = gcs === gcs0 ? `  alloc ${((heap - liveBefore) / n).toFixed(0)} B/job` : "";
  await h.close();
  await system.drop(ns);
  const cpuUs = (cpu.user + cpu.system) / n;
  console.log(
    `round ${r}: ${Math.round((n / ms) * 1_000)
      .toLocaleString("en")
      .padStart(
        8,
      )} jobs/s  Node CPU ${cpuUs.toFixed(2)} µs/job  GC ${(gcMs - gc0).toFixed(0)} ms in ${gcs - gcs0} (${majors - majors0} major)  ` +
      `young ${newSpace0} → ${newSpaceKB()} KB  ELU ${(elu * 100).toFixed(0)} %  ` +
      `heap ${(heap / 2 ** 20).toFixed(0)} MB${collect ? ` (live at start ${(liveBefore / 2 ** 20).toFixed(0)} MB)` : ""}  statements/job ${((statements - st0) / n).toFixed(4)}${allocated}`,
  );
}
clearInterval(keepAlive);
