/**
 * S3's drain (bench/compare/drain.ts: preload, boot, first handler → all settled) through the same
 * okengine harness, several rounds in one process, with what a rate alone hides: Node CPU per job,
 * GC pauses, heap, and (postgres) statements per job counted at the client. Rounds differing in one
 * process (issue 17: memory 270k in round 1, 147k median) show up here round by round.
 *
 *   node --import tsx bench/s3-rounds.ts [--driver=memory|postgres] [--n=100000] [--rounds=5] [--concurrency=32]
 */
import { PerformanceObserver } from "node:perf_hooks";
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

let gcMs = 0;
let gcs = 0;
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) {
    gcMs += e.duration;
    gcs++;
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
  const st0 = statements;
  const cpu0 = process.cpuUsage();
  await h.start();
  await finished.promise;
  await until(async () => (await h.remaining()) === 0, 60_000, 10);
  const ms = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  const heap = process.memoryUsage().heapUsed;
  await h.close();
  await system.drop(ns);
  const cpuUs = (cpu.user + cpu.system) / n;
  console.log(
    `round ${r}: ${Math.round((n / ms) * 1_000)
      .toLocaleString("en")
      .padStart(
        8,
      )} jobs/s  Node CPU ${cpuUs.toFixed(2)} µs/job  GC ${(gcMs - gc0).toFixed(0)} ms in ${gcs - gcs0}  ` +
      `heap ${(heap / 2 ** 20).toFixed(0)} MB${collect ? ` (live at start ${(liveBefore / 2 ** 20).toFixed(0)} MB)` : ""}  statements/job ${((statements - st0) / n).toFixed(4)}`,
  );
}
clearInterval(keepAlive);
