/**
 * Where an okengine drain spends its round trips: drains N preloaded no-op
 * jobs through a whole app (the S3 setup) and counts every Store call the
 * worker pool makes — calls per message, items per call, mean latency — plus
 * the Node process's CPU share. `--what-if` replays the drain with two pool
 * changes simulated around the store (no src edits): a prefetch of 256
 * messages per claim, and no `nextLeaseExpiry` after every pump.
 *
 *   node --import tsx bench/compare/profile-okengine.ts [--driver=postgres] [--n=20000] [--concurrency=32] [--what-if]
 *   node --cpu-prof --cpu-prof-dir=/tmp/prof --import tsx bench/compare/profile-okengine.ts
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { benchLogger } from "./logger.ts";
import { createApp, type JournalDriverName } from "../../src/index.ts";
import type { ClaimedMessage, ClaimRequest, Store } from "../../src/store/types.ts";
import { dropSchema, ensureDatabase, randomName, signalled } from "./env.ts";
import { benchModule, okengineConfig } from "./okengine.ts";

const arg = (name: string, def: string): string =>
  process.argv.find((a) => a.startsWith(`--${name}=`))?.split("=")[1] ?? def;
const driver = arg("driver", "postgres") as JournalDriverName;
const n = Number(arg("n", "20000"));
const concurrency = Number(arg("concurrency", "32"));

type Counted = "claim" | "settle" | "nextLeaseExpiry" | "enqueue";
interface Stat {
  calls: number;
  items: number;
  ms: number;
}

/** Wraps one Store method to count calls, items and time. */
function instrument(store: Store, k: Counted, stats: Record<Counted, Stat>): void {
  const methods = store as unknown as Record<Counted, (...a: unknown[]) => Promise<unknown>>;
  const orig = methods[k].bind(store);
  stats[k] = { calls: 0, items: 0, ms: 0 };
  methods[k] = async (...a: unknown[]) => {
    const t0 = performance.now();
    const r = await orig(...a);
    const s = stats[k];
    s.calls++;
    s.ms += performance.now() - t0;
    s.items += Array.isArray(r) ? r.length : Array.isArray(a[0]) ? a[0].length : 0;
    return r;
  };
}

/** Simulated pool changes: claim 256 at once and serve the pool from a local buffer; skip the per-pump lease query. */
function whatIf(store: Store): void {
  const claim = store.claim.bind(store);
  const buffer: ClaimedMessage[] = [];
  const methods = store as unknown as {
    claim(r: ClaimRequest): Promise<ClaimedMessage[]>;
    nextLeaseExpiry(): Promise<number | null>;
  };
  methods.claim = async (r) => {
    if (buffer.length < r.max) buffer.push(...(await claim({ ...r, max: 256 })));
    return buffer.splice(0, r.max);
  };
  methods.nextLeaseExpiry = async () => null;
}

async function run(simulate: boolean): Promise<void> {
  const ns =
    driver === "postgres"
      ? randomName("oke_bench")
      : driver === "file"
        ? await mkdtemp(join(tmpdir(), "oke_bench_"))
        : "memory";
  let done = 0;
  let t0 = 0;
  const finished = signalled();
  const { sig, exports } = benchModule({
    retries: 3,
    handler: () => {
      if (done === 0) t0 = performance.now();
      if (++done === n) finished.resolve();
    },
  });
  const app = createApp({
    modules: [{ exports }],
    env: "prod",
    config: okengineConfig(driver, { name: ns }, { concurrency }),
    logger: benchLogger(),
    root: tmpdir(),
  });
  await app.store.open();
  for (let i = 0; i < n; i += 1_000) {
    const batch = Array.from({ length: Math.min(1_000, n - i) }, (_, k) => ({
      id: `p${i + k}`,
      signal: sig.name,
      key: null,
      payload: { n: i + k, j: 0, key: null },
      parentRunId: null,
    }));
    await app.store.enqueue(batch, app.clock.now());
  }
  const stats = {} as Record<Counted, Stat>;
  // Count the calls that reach the driver; the simulation sits in front of them.
  for (const k of ["claim", "settle", "nextLeaseExpiry", "enqueue"] as const) instrument(app.store, k, stats);
  if (simulate) whatIf(app.store);
  const cpu0 = process.cpuUsage();
  await app.boot();
  await finished.promise;
  const handled = performance.now() - t0;
  const left = async (): Promise<number> => {
    const st = await app.store.stats(sig.name, app.clock.now());
    return st.pending + st.inflight;
  };
  while ((await left()) > 0) await new Promise((r) => setTimeout(r, 10));
  const ms = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  await app.stop();
  if (driver === "postgres") await dropSchema(ns);
  if (driver === "file") await rm(ns, { recursive: true, force: true });
  const cpuMs = (cpu.user + cpu.system) / 1_000;
  console.log(
    `${simulate ? "what-if (prefetch 256, no per-pump lease query)" : "as is"}: ${n} jobs settled in ${ms.toFixed(0)} ms = ${Math.round((n / ms) * 1_000)}/s ` +
      `(last handler at ${handled.toFixed(0)} ms); Node CPU ${cpuMs.toFixed(0)} ms (${((cpuMs / ms) * 100).toFixed(0)}% of one core)`,
  );
  for (const [k, s] of Object.entries(stats)) {
    if (s.calls === 0) continue;
    console.log(
      `  ${k.padEnd(16)} ${String(s.calls).padStart(6)} calls  ${(s.calls / n).toFixed(3)} per message  ${(s.items / s.calls).toFixed(1)} items/call  ${(s.ms / s.calls).toFixed(2)} ms/call`,
    );
  }
}

if (driver === "postgres") await ensureDatabase();
const keepAlive = setInterval(() => undefined, 1_000);
console.log(`okengine drain profile: driver ${driver}, ${n} no-op jobs, concurrency ${concurrency}`);
await run(false);
if (process.argv.includes("--what-if")) await run(true);
clearInterval(keepAlive);
