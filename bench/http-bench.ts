/**
 * okengine HTTP vs raw node:http doing the same work, on loopback, with the
 * load generator in its own process (bench/http-load.ts).
 *
 *   node --import tsx bench/http-bench.ts            # print the table
 *   node --import tsx bench/http-bench.ts --write    # also update the "HTTP" section of bench/README.md
 *
 * BENCH_SECONDS (default 8), BENCH_ROUNDS (3), BENCH_CONNECTIONS (32) tune a run.
 * Rounds alternate raw/oke so drift (thermal, other load) hits both; the
 * median round of each is reported.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

interface LoadResult {
  requests: number;
  rps: number;
  errors: number;
  p50Ms: number;
  p99Ms: number;
}

interface Result extends LoadResult {
  /** Server CPU time (user + system) per request during the measured window. */
  cpuUsPerRequest: number;
}

const here = (f: string): string => fileURLToPath(new URL(f, import.meta.url));
const SECONDS = Number(process.env.BENCH_SECONDS ?? 8);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);
// Server on CPU 1, load generator on CPU 0, so the two never fight for one core (BENCH_PIN=0 to disable).
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

/** Runs `file` under tsx (with an IPC channel) and resolves `first` with its first stdout line, parsed. */
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

const cpuOf = (server: ChildProcess): Promise<NodeJS.CpuUsage> =>
  new Promise((resolve) => {
    server.once("message", (m) => resolve(m as NodeJS.CpuUsage));
    server.send("cpu");
  });

async function measure(kind: "raw" | "oke", scenario: (typeof scenarios)[number]): Promise<Result> {
  const server = run<{ port: number }>([here("./http-server.ts"), kind], PIN ? 1 : undefined);
  try {
    const { port } = await server.first;
    const load = run<LoadResult>(
      [
        here("./http-load.ts"),
        JSON.stringify({
          port,
          method: scenario.method,
          path: scenario.path,
          body: "body" in scenario ? scenario.body : undefined,
          connections: CONNECTIONS,
          seconds: SECONDS,
          warmup: 2,
        }),
      ],
      PIN ? 0 : undefined,
    );
    const marks: Array<Promise<NodeJS.CpuUsage>> = [];
    load.child.on("message", () => marks.push(cpuOf(server.child)));
    const result = await load.first;
    await load.kill();
    const [a, b] = await Promise.all(marks);
    const cpuUs = b!.user + b!.system - (a!.user + a!.system);
    return { ...result, cpuUsPerRequest: +(cpuUs / result.requests).toFixed(1) };
  } finally {
    await server.kill();
  }
}

const median = (xs: Result[], by: (r: Result) => number): Result =>
  [...xs].sort((a, b) => by(a) - by(b))[Math.floor(xs.length / 2)]!;

const loadBefore = loadavg()[0]!.toFixed(2);
const rows: string[] = [];
for (const scenario of scenarios) {
  const results: Record<"raw" | "oke", Result[]> = { raw: [], oke: [] };
  for (let round = 0; round < ROUNDS; round++) {
    for (const kind of round % 2 === 0 ? (["raw", "oke"] as const) : (["oke", "raw"] as const)) {
      const r = await measure(kind, scenario);
      if (r.errors > 0) throw new Error(`${kind} ${scenario.name}: ${r.errors} non-200 responses`);
      results[kind].push(r);
      console.error(
        `${scenario.name} round ${round + 1} ${kind}: ${r.rps} req/s, ${r.cpuUsPerRequest} µs CPU/req, p50 ${r.p50Ms} ms, p99 ${r.p99Ms} ms`,
      );
    }
  }
  const raw = median(results.raw, (r) => r.rps);
  const oke = median(results.oke, (r) => r.rps);
  const rawCpu = median(results.raw, (r) => r.cpuUsPerRequest).cpuUsPerRequest;
  const okeCpu = median(results.oke, (r) => r.cpuUsPerRequest).cpuUsPerRequest;
  rows.push(
    `| ${scenario.name} | ${raw.rps} | ${oke.rps} | **${(oke.rps / raw.rps).toFixed(2)}x** | ${rawCpu} | ${okeCpu} | **${(rawCpu / okeCpu).toFixed(2)}x** | ${raw.p50Ms} / ${raw.p99Ms} | ${oke.p50Ms} / ${oke.p99Ms} |`,
  );
}

const section = [
  "## HTTP",
  "",
  "`bench/http-bench.ts`: an okengine app (`createApp`, env test, memory journal) against raw `node:http` doing the",
  "same work per request — parse the JSON body, validate it with the same zod schema, answer the same",
  "`{ ok, data }` envelope. Both listen on 127.0.0.1; `bench/http-load.ts` drives them from a separate process",
  `with ${CONNECTIONS} keep-alive connections, one request in flight each (raw sockets, autocannon-style)${PIN ? "; server pinned to CPU 1, load generator to CPU 0 (taskset)" : ""}.`,
  `Each figure is the median of ${ROUNDS} alternating rounds of ${SECONDS} s after a 2 s warm-up. Target: okengine >= 0.8x raw.`,
  "",
  "Two ratios: requests/s (what a client sees, sensitive to anything else running on the machine) and",
  "server CPU time per request (user + system, sampled by the server at the start and end of the measured",
  "window; steadier on a shared machine). `CPU ratio` = raw µs / okengine µs, so 0.8 means okengine",
  "spends 25% more CPU per request.",
  "",
  `Machine: ${cpus().length} × ${cpus()[0]?.model.trim() ?? "?"}, Node ${process.version}; load average before / after the run:`,
  `${loadBefore} / ${loadavg()[0]!.toFixed(2)}.`,
  "",
  "| Scenario | raw req/s | okengine req/s | req/s ratio | raw µs CPU/req | okengine µs CPU/req | CPU ratio (raw/oke) | raw p50 / p99 ms | okengine p50 / p99 ms |",
  "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
  ...rows,
  "",
  "Run it: `node --import tsx bench/http-bench.ts --write` (updates this section).",
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
