/**
 * S5 (bench/compare/drain.ts: 1 000 keys × 50, concurrency 32, per-key order checked) in interleaved
 * rounds over several systems in one process, with the load average beside every sample: the A/B
 * harness behind the S5 figures in bench/README.md. `--base=DIR` adds okengine from another checkout
 * (e.g. `git archive main | tar -x -C DIR`, node_modules linked) as "okengine-base", so a change is
 * measured against main in the same minutes as the peer. The order of systems rotates every round,
 * so none always runs first (on a fresh server cache) or right after the same neighbour.
 *
 *   node --import tsx bench/s5-ab.ts [--rounds=5] [--systems=okengine-postgres,graphile-worker]
 *     [--base=/tmp/main-checkout] [--keys=1000] [--per-key=50]
 */
import { readFileSync } from "node:fs";
import { loadavg } from "node:os";
import { ensureDatabase, withClient } from "./compare/env.ts";
import { drain } from "./compare/drain.ts";
import { keyedJobs } from "./compare/scenario-kit.ts";
import type { Progress } from "./compare/progress.ts";
import { graphileSystem } from "./compare/graphile.ts";
import { queueSystem } from "./compare/systems.ts";
import type { QueueSystem, Sizes } from "./compare/types.ts";

// The server processes serving this run are found in pg_stat_activity by application_name, their CPU
// read from /proc: the peers' connections and the harness's carry APP (libpq's PGAPPNAME, which
// node-postgres reads too); okengine names its own `okengine:<schema>` (postgres-store.ts), so the
// schema of the namespace in use is kept in `current`.
const APP = `s5ab_${process.pid}`;
let current = "";
process.env.PGAPPNAME = APP;
const TICK_MS = 10; // /proc/<pid>/stat counts CPU in clock ticks of 1/100 s

/** CPU ms used so far by each server process serving this run, by pid. */
async function serverCpu(): Promise<Map<number, number>> {
  const pids = await withClient(async (c) => {
    const { rows } = await c.query<{ pid: number }>(
      "SELECT pid FROM pg_stat_activity WHERE application_name IN ($1, $2) AND pid <> pg_backend_pid()",
      [APP, `okengine:${current}`],
    );
    return rows.map((r) => r.pid);
  });
  const out = new Map<number, number>();
  for (const pid of pids) {
    try {
      // Fields 14 and 15 (utime, stime) after the ")" that ends the process name.
      const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
      out.set(pid, (Number(f[11]) + Number(f[12])) * TICK_MS);
    } catch {
      // The backend exited between the query and the read.
    }
  }
  return out;
}

const arg = (name: string, def: string): string =>
  process.argv.find((a) => a.startsWith(`--${name}=`))?.split("=")[1] ?? def;
const rounds = Number(arg("rounds", "5"));
const ids = arg("systems", "okengine-postgres,graphile-worker").split(",");
const base = arg("base", "");
const keys = Number(arg("keys", "1000"));
const perKey = Number(arg("per-key", "50"));

// graphile-worker-pollN: graphile-worker with pollInterval N ms instead of its default 2 000.
const systems: QueueSystem[] = ids.map((id) =>
  id.startsWith("graphile-worker-poll") ? graphileSystem(Number(id.slice(20))) : queueSystem(id),
);
if (base !== "") {
  const mod = (await import(`${base}/bench/compare/okengine.ts`)) as {
    okengineSystem: (d: "postgres") => QueueSystem;
  };
  systems.push({ ...mod.okengineSystem("postgres"), id: "okengine-base", label: "okengine (base)" });
}

// Full mode's sizes (bench/run.ts); only S5's and the cap matter here.
const sizes = { s5Keys: keys, s5PerKey: perKey, s5Drains: 1, capSeconds: 30, repeats: 1 } as Sizes;
const progress = { tick: () => undefined } as unknown as Progress;
await ensureDatabase();
// Each system's fresh namespace is remembered (see `current`).
for (const [i, system] of systems.entries())
  systems[i] = {
    ...system,
    fresh: async () => {
      const ns = await system.fresh();
      current = ns.name;
      return ns;
    },
  };
const keepAlive = setInterval(() => undefined, 1_000);
const all = keyedJobs(keys, perKey);
const samples = new Map<string, number[]>(systems.map((s) => [s.id, []]));
/** [server, node] CPU ms per 1 000 jobs, per drain. */
const cpu = new Map<string, Array<[number, number]>>(systems.map((s) => [s.id, []]));
const la = (): string =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(" ");
console.log(
  `S5 A/B: ${keys} keys × ${perKey}, ${rounds} rounds, systems ${systems.map((s) => s.id).join(", ")}`,
);
for (let r = 0; r < rounds; r++) {
  const order = systems.map((_, i) => systems[(i + r) % systems.length]!);
  for (const system of order) {
    const before = la();
    // S5's own check (drain.ts s5), plus the start times of the handlers: where the time went.
    const last = new Map<string, number>();
    let violations = 0;
    const starts: number[] = [];
    // Server CPU of this run's backends, and this process's CPU (okengine's or the peer's Node side).
    let cpu0 = new Map<number, number>();
    let node0 = process.cpuUsage();
    let serverMs = 0;
    let nodeMs = 0;
    const around = {
      before: async () => {
        cpu0 = await serverCpu();
        node0 = process.cpuUsage();
      },
      after: async () => {
        const n = process.cpuUsage(node0);
        nodeMs = (n.user + n.system) / 1_000;
        // A backend that connected during the drain started from zero.
        for (const [pid, ms] of await serverCpu()) serverMs += ms - (cpu0.get(pid) ?? 0);
      },
    };
    const d = await drain(
      system,
      { sizes, progress },
      all,
      { concurrency: 32, retries: 3, keyed: true },
      (c) => {
        starts.push(performance.now());
        const prev = last.get(c.key!) ?? -1;
        if (c.j !== prev + 1) violations++;
        last.set(c.key!, c.j);
      },
      around,
    );
    cpu.get(system.id)!.push([(serverMs / d.ran) * 1_000, (nodeMs / d.ran) * 1_000]);
    samples.get(system.id)!.push(d.rate);
    const total = all.length / d.rate;
    const t0 = starts[0] ?? 0;
    let gap = 0;
    for (let i = 1; i < starts.length; i++) gap = Math.max(gap, starts[i]! - starts[i - 1]!);
    const at = (q: number): string =>
      (((starts[Math.floor(q * (starts.length - 1))] ?? t0) - t0) / 1_000).toFixed(2);
    console.log(
      `round ${r + 1} ${system.id.padEnd(18)} ${d.rate.toFixed(0).padStart(7)} jobs/s in ${total.toFixed(2)} s; CPU per 1 000 jobs: server ${((serverMs / d.ran) * 1_000).toFixed(0)} ms, node ${((nodeMs / d.ran) * 1_000).toFixed(0)} ms (10/50/90/100 % started at ${at(0.1)}/${at(0.5)}/${at(0.9)}/${at(1)} s, longest gap ${gap.toFixed(0)} ms)  violations ${violations}${d.duplicates > 0 ? `  duplicates ${d.duplicates}` : ""}${d.capped ? " CAPPED" : ""}  load ${before} → ${la()}`,
    );
  }
}
clearInterval(keepAlive);
const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};
const ref = samples.get("graphile-worker");
for (const [id, xs] of samples) {
  const ratios =
    ref && id !== "graphile-worker" ? xs.map((x, i) => (x / ref[i]!).toFixed(2)).join(" / ") : "";
  console.log(
    `${id.padEnd(18)} median ${median(xs).toFixed(0).padStart(7)} jobs/s  samples ${xs.map((x) => x.toFixed(0)).join(" / ")}${ratios ? `  ÷ graphile-worker per round ${ratios}` : ""}; CPU per 1 000 jobs (median): server ${median(cpu.get(id)!.map((c) => c[0])).toFixed(0)} ms, node ${median(cpu.get(id)!.map((c) => c[1])).toFixed(0)} ms`,
  );
}
