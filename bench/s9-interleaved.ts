/**
 * S9 one at a time, okengine on PostgreSQL against DBOS, in alternating chunks in one process, so
 * that both see the same machine: on this VM a system's rate moved by a third between runs minutes
 * apart (bench/README.md, "Reading a full run on this machine"), so two figures taken a minute apart
 * (as `npm run bench` takes them, each system in its own process) compare the machine's moments as
 * much as the systems. Each system is opened once and warmed up with WARMUP runs, then CHUNKS
 * chunks of CHUNK runs each alternate (the order swapped every pair); per pair, okengine's rate ÷
 * DBOS's. Both sit idle in the process while the other runs (each keeps its listeners and pollers).
 *
 *   node --import tsx bench/s9-interleaved.ts   # WARMUP (2000), CHUNK (300), CHUNKS (12 per system)
 */
import { readFileSync } from "node:fs";
import { dbosWorkflows } from "./compare/dbos.ts";
import { ensureDatabase, median } from "./compare/env.ts";
import { okengineWorkflows } from "./compare/okengine-workflows.ts";
import type { WorkflowHarness } from "./compare/types.ts";

const WARMUP = Number(process.env.WARMUP ?? 2_000);
const CHUNK = Number(process.env.CHUNK ?? 300);
const CHUNKS = Number(process.env.CHUNKS ?? 12);

const dbosVersion = (
  JSON.parse(
    readFileSync(new URL("./node_modules/@dbos-inc/dbos-sdk/package.json", import.meta.url), "utf8"),
  ) as { version: string }
).version;
const systems = [okengineWorkflows("postgres"), dbosWorkflows(dbosVersion)];
let nextId = 0;

/** Runs `n` 3-step workflows one at a time; wf/s. */
async function rate(h: WorkflowHarness, n: number): Promise<number> {
  const t0 = performance.now();
  for (let i = 0; i < n; i++) await h.runThreeSteps(nextId++);
  return n / ((performance.now() - t0) / 1_000);
}

await ensureDatabase();
const harnesses: WorkflowHarness[] = [];
try {
  for (const s of systems) {
    const h = await s.open();
    harnesses.push(h);
    const warm = await rate(h, WARMUP);
    process.stdout.write(`${s.id}: warm-up ${WARMUP} runs, ${warm.toFixed(0)} wf/s\n`);
  }
  const rates: number[][] = systems.map(() => []);
  const ratios: number[] = [];
  for (let pair = 0; pair < CHUNKS; pair++) {
    const order = pair % 2 === 0 ? [0, 1] : [1, 0];
    for (const i of order) rates[i]!.push(await rate(harnesses[i]!, CHUNK));
    ratios.push(rates[0]![pair]! / rates[1]![pair]!);
    process.stdout.write(
      `pair ${pair + 1}: ${systems.map((s, i) => `${s.id} ${rates[i]![pair]!.toFixed(0)}`).join(", ")} wf/s; ratio ${ratios[pair]!.toFixed(2)}×\n`,
    );
  }
  const load = readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");
  process.stdout.write(
    `\n${systems.map((s, i) => `${s.id} median ${median(rates[i]!).toFixed(0)} wf/s`).join(", ")}; ` +
      `ratio per pair median ${median(ratios).toFixed(2)}× (min ${Math.min(...ratios).toFixed(2)}, max ${Math.max(...ratios).toFixed(2)}); ` +
      `${CHUNKS} pairs of ${CHUNK} runs after ${WARMUP} warm-up runs each; loadavg ${load}\n`,
  );
} finally {
  for (const h of harnesses) await h.close();
}
