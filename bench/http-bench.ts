/**
 * okengine HTTP vs raw node:http doing the same work, on loopback.
 *
 *   node --import tsx bench/http-bench.ts            # print the table
 *   node --import tsx bench/http-bench.ts --write    # also update the "HTTP" section of bench/README.md
 *
 * Both servers run at once (bench/http-server.ts raw | oke) and one load
 * generator (bench/http-load.ts) drives them in alternating 500 ms segments,
 * so whatever else runs on the machine lands on both alike. With taskset the
 * servers share CPU 1 and the generator has CPU 0 (BENCH_PIN=0 to disable).
 *
 * BENCH_SECONDS (20 per round), BENCH_ROUNDS (3), BENCH_CONNECTIONS (32) tune a run;
 * each round starts fresh processes and the median round is reported.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

interface LoadResult {
  port: number;
  requests: number;
  rps: number;
  errors: number;
  p50Ms: number;
  p99Ms: number;
}

interface Result extends LoadResult {
  /** Server CPU time (user + system) per request during the measured window. */
  cpuUs: number;
}

const KINDS = ["raw", "oke"] as const;
type Kind = (typeof KINDS)[number];

const here = (f: string): string => fileURLToPath(new URL(f, import.meta.url));
const SECONDS = Number(process.env.BENCH_SECONDS ?? 20);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);
const SEGMENT_MS = 500;
const PIN = process.env.BENCH_PIN !== "0" && cpus().length >= 2 && spawnSync("taskset", ["-V"]).status === 0;

const scenarios = [
  {
    name: "POST /echo (JSON body, zod `in`, echo)",
    method: "POST",
    path: "/echo",
    body: JSON.stringify({ name: "ada", count: 3, tags: ["a", "b", "c"] }),
  },
  { name: "GET /item (small object)", method: "GET", path: "/item" },
] as const;

interface Proc<T> {
  first: Promise<T>;
  child: ChildProcess;
  kill(): Promise<void>;
}

/** Runs a bench file under tsx (with an IPC channel); `first` is its first stdout line, parsed. */
function run<T>(args: string[], cpu: number | undefined): Proc<T> {
  const node = [process.execPath, "--import", "tsx", ...args];
  const [cmd, ...argv] = cpu === undefined ? node : ["taskset", "-c", String(cpu), ...node];
  const child = spawn(cmd!, argv, {
    stdio: ["ignore", "pipe", "inherit", "ipc"],
    env: { ...process.env, NODE_ENV: "production" },
  });
  const exited = new Promise<void>((r) => child.once("exit", () => r()));
  const first = new Promise<T>((resolve, reject) => {
    createInterface({ input: child.stdout! }).once("line", (l) => resolve(JSON.parse(l) as T));
    void exited.then(() => reject(new Error(`${args.join(" ")} exited without output`)));
  });
  return {
    first,
    child,
    kill: async () => {
      if (child.exitCode === null) child.kill("SIGTERM");
      await exited;
    },
  };
}

const cpuOf = (server: ChildProcess): Promise<number> =>
  new Promise((resolve) => {
    server.once("message", (m) => resolve((m as NodeJS.CpuUsage).user + (m as NodeJS.CpuUsage).system));
    server.send("cpu");
  });

async function round(scenario: (typeof scenarios)[number]): Promise<Record<Kind, Result>> {
  const servers = KINDS.map((kind) =>
    run<{ port: number }>([here("./http-server.ts"), kind], PIN ? 1 : undefined),
  );
  try {
    const ports = await Promise.all(servers.map((s) => s.first.then((x) => x.port)));
    const load = run<LoadResult[]>(
      [
        here("./http-load.ts"),
        JSON.stringify({
          ports,
          method: scenario.method,
          path: scenario.path,
          body: "body" in scenario ? scenario.body : undefined,
          connections: CONNECTIONS,
          seconds: SECONDS,
          segmentMs: SEGMENT_MS,
          warmup: 2,
        }),
      ],
      PIN ? 0 : undefined,
    );
    const marks: Array<Promise<number[]>> = [];
    load.child.on("message", () => marks.push(Promise.all(servers.map((s) => cpuOf(s.child)))));
    const results = await load.first;
    await load.kill();
    const [before, after] = await Promise.all(marks);
    const out = {} as Record<Kind, Result>;
    KINDS.forEach((kind, i) => {
      const r = results[i]!;
      if (r.errors > 0) throw new Error(`${kind} ${scenario.name}: ${r.errors} failed requests`);
      out[kind] = { ...r, cpuUs: +((after![i]! - before![i]!) / r.requests).toFixed(1) };
    });
    return out;
  } finally {
    await Promise.all(servers.map((s) => s.kill()));
  }
}

const medianBy = <T>(xs: T[], by: (x: T) => number): T =>
  [...xs].sort((a, b) => by(a) - by(b))[Math.floor(xs.length / 2)]!;

const loadBefore = loadavg()[0]!.toFixed(2);
const rows: string[] = [];
for (const scenario of scenarios) {
  const rounds: Array<Record<Kind, Result>> = [];
  for (let i = 0; i < ROUNDS; i++) {
    const r = await round(scenario);
    rounds.push(r);
    console.error(
      `${scenario.name} round ${i + 1}: raw ${r.raw.rps} req/s ${r.raw.cpuUs} µs/req · oke ${r.oke.rps} req/s ${r.oke.cpuUs} µs/req · ratio ${(r.oke.rps / r.raw.rps).toFixed(2)}`,
    );
  }
  const m = medianBy(rounds, (r) => r.oke.rps / r.raw.rps);
  const cpu = medianBy(rounds, (r) => r.raw.cpuUs / r.oke.cpuUs);
  rows.push(
    `| ${scenario.name} | ${m.raw.rps} | ${m.oke.rps} | **${(m.oke.rps / m.raw.rps).toFixed(2)}x** | ` +
      `${cpu.raw.cpuUs} | ${cpu.oke.cpuUs} | **${(cpu.raw.cpuUs / cpu.oke.cpuUs).toFixed(2)}x** | ` +
      `${m.raw.p50Ms} / ${m.raw.p99Ms} | ${m.oke.p50Ms} / ${m.oke.p99Ms} |`,
  );
}

const section = [
  "## HTTP",
  "",
  "`bench/http-bench.ts`: an okengine app (`createApp`, env test, memory journal) against raw `node:http` doing the",
  "same work per request — parse the JSON body, validate it with the same zod schema, answer the same",
  "`{ ok, data }` envelope. Both servers run at the same time on 127.0.0.1; `bench/http-load.ts`, in its own",
  `process, drives them in alternating ${SEGMENT_MS} ms segments with ${CONNECTIONS} keep-alive connections each, one request`,
  "in flight per connection (raw sockets, autocannon-style), so load from elsewhere on the machine hits both",
  `alike${PIN ? "; the servers share CPU 1 and the generator has CPU 0 (taskset)" : ""}. Each row is the median of ${ROUNDS} rounds`,
  `of ${SECONDS} s (fresh processes, 2 s warm-up). Target: okengine >= 0.8x raw requests/s.`,
  "",
  "`CPU µs/req` is each server's own CPU time (user + system) over the measured window divided by the",
  "requests it answered; the CPU ratio is raw / okengine, so 0.8 means okengine spends 25% more per request.",
  "",
  `Machine: ${cpus().length} × ${cpus()[0]?.model.trim() ?? "?"}, Node ${process.version}; 1-minute load average`,
  `before / after: ${loadBefore} / ${loadavg()[0]!.toFixed(2)} (the machine is shared; expect a few % of noise).`,
  "",
  "| Scenario | raw req/s | okengine req/s | req/s ratio | raw CPU µs/req | okengine CPU µs/req | CPU ratio | raw p50 / p99 ms | okengine p50 / p99 ms |",
  "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
  ...rows,
  "",
  "Run it: `node --import tsx bench/http-bench.ts --write` (rewrites this section).",
  "",
].join("\n");

console.log(section);

if (process.argv.includes("--write")) {
  const file = here("./README.md");
  const text = existsSync(file) ? readFileSync(file, "utf8") : "# Benchmarks\n\n";
  const start = text.search(/^## HTTP$/m);
  let next: string;
  if (start === -1) next = `${text.trimEnd()}\n\n${section}`;
  else {
    const after = text.slice(start + 1).search(/^## /m);
    next = text.slice(0, start) + section + (after === -1 ? "" : `\n${text.slice(start + 1 + after)}`);
  }
  writeFileSync(file, next);
}
