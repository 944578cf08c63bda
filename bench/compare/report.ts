/**
 * Turns the figures of one run into the console table, bench/results/<date>.json,
 * bench/results/<date>.md and the "Comparison" section of bench/README.md
 * (other sections of that file are left as they are).
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Machine } from "./env.ts";
import type { Figure, ScenarioId, Sizes } from "./types.ts";

export interface SystemInfo {
  id: string;
  label: string;
  config: string[];
}

export interface RunResult {
  date: string;
  mode: "quick" | "full";
  seconds: number;
  machine: Machine;
  versions: Record<string, string>;
  sizes: Sizes;
  systems: SystemInfo[];
  reference: string;
  figures: Figure[];
  notes: string[];
}

export const SCENARIOS: Record<ScenarioId, string> = {
  S1: "S1 — enqueue one at a time (each awaited)",
  S2: "S2 — enqueue in bulk (batches of 1 000)",
  S3: "S3 — drain a preloaded backlog of no-op jobs",
  S4: "S4 — enqueue → handler start latency, one job at a time",
  S5: "S5 — per-key FIFO drain (keys × jobs per key), order checked",
  S6: "S6 — 10% of jobs always fail: retries, then dead letter",
  S7: "S7 — a worker SIGKILLed mid-job: time until its jobs run again",
  S9: "S9 — durable workflows (3 steps) and a 1 s durable sleep",
  S14: "S14 — broadcast emit on one instance → handler on another (okengine only)",
  S15: "S15 — one instance holding open SSE streams on one live tape (okengine only)",
  S16: 'S16 — schedule fire lag: every("1s") clocks on 3 instances; graphile-worker\'s crontab at its minute granularity',
  S13: "S13 — parked durable runs at scale: boot to ready, memory per parked run, resume of the due ones",
  S10: "S10 — big tables (issue 17's S14): drain and latency with delivered messages and finished runs retained, ÷ empty tables",
  S11: "S11 — held snapshot (issue 17's S15): a REPEATABLE READ transaction open while jobs arrive at a steady rate",
  S12: "S12 — idle cost (issue 17's S16): 10 idle instances, server transactions/s and CPU per instance",
};

const fmt = (v: number | null, unit: string): string => {
  if (v === null || Number.isNaN(v)) return "n/a";
  if (unit === "ms") return v < 10 ? v.toFixed(2) : v.toFixed(1);
  if (unit === "s" || unit === "×" || unit === "ms/s") return v.toFixed(2);
  if (unit === "statements/s" && v < 100) return v.toFixed(1);
  return Math.round(v).toLocaleString("en-US").replace(/,/g, " ");
};

/** This figure divided by the reference system's, or null. */
export function ratio(f: Figure, all: Figure[], reference: string): number | null {
  const ref = all.find((x) => x.scenario === f.scenario && x.metric === f.metric && x.system === reference);
  if (!ref || ref.value === null || f.value === null || ref.value === 0) return null;
  return f.value / ref.value;
}

const cell = (f: Figure | undefined, all: Figure[], reference: string): string => {
  if (!f) return "";
  if (f.value === null) return "n/a";
  const r = ratio(f, all, reference);
  return `${fmt(f.value, f.unit)}${r === null || f.system === reference ? "" : ` (${r.toFixed(2)}×)`}`;
};

/** Rows = (scenario, metric), columns = systems that have at least one figure. */
function matrix(r: RunResult): { header: string[]; rows: string[][] } {
  const systems = r.systems.filter((s) => r.figures.some((f) => f.system === s.id));
  const keys: Array<{ scenario: ScenarioId; metric: string; unit: string; better: string }> = [];
  for (const f of r.figures) {
    if (!keys.some((k) => k.scenario === f.scenario && k.metric === f.metric))
      keys.push({ scenario: f.scenario, metric: f.metric, unit: f.unit, better: f.better });
  }
  const header = ["scenario", "unit", ...systems.map((s) => s.label)];
  const rows = keys.map((k) => [
    `${k.scenario} ${k.metric}`,
    `${k.unit} (${k.better === "higher" ? "↑" : "↓"})`,
    ...systems.map((s) =>
      cell(
        r.figures.find((f) => f.scenario === k.scenario && f.metric === k.metric && f.system === s.id),
        r.figures,
        r.reference,
      ),
    ),
  ]);
  return { header, rows };
}

export function consoleTable(r: RunResult): string {
  const { header, rows } = matrix(r);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)));
  const line = (cells: string[]): string =>
    cells.map((c, i) => (i < 2 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join("  ");
  return [line(header), widths.map((w) => "-".repeat(w)).join("  "), ...rows.map(line)].join("\n");
}

const mdTable = (header: string[], rows: string[][]): string =>
  [
    `| ${header.join(" | ")} |`,
    `| ${header.map((_, i) => (i < 2 ? "---" : "---:")).join(" | ")} |`,
    ...rows.map((row) => `| ${row.join(" | ")} |`),
  ].join("\n");

interface Target {
  what: string;
  ok: boolean | null;
  detail: string;
}

export function targets(r: RunResult): Target[] {
  const v = (s: ScenarioId, metric: string, system: string): number | null =>
    r.figures.find((f) => f.scenario === s && f.metric === metric && f.system === system)?.value ?? null;
  const check = (
    what: string,
    a: number | null,
    b: number | null,
    ok: (a: number, b: number) => boolean,
    unit: string,
  ): Target =>
    a === null || b === null
      ? { what, ok: null, detail: "not measured in this run" }
      : {
          what,
          ok: ok(a, b),
          detail: `okengine ${fmt(a, unit)} ${unit} vs ${fmt(b, unit)} ${unit} (${(a / b).toFixed(2)}×)`,
        };
  const ok = r.reference;
  const atMost = (
    what: string,
    a: number | null,
    max: number,
    unit: string,
    who = "okengine (file)",
  ): Target =>
    a === null
      ? { what, ok: null, detail: "not measured in this run" }
      : { what, ok: a <= max, detail: `${who} ${fmt(a, unit)} ${unit}` };
  const s13 = (prefix: string): number | null =>
    r.figures.find((f) => f.scenario === "S13" && f.metric.startsWith(prefix) && f.system === "okengine-file")
      ?.value ?? null;
  const ratioOf = (what: string, a: number | null, min: number, unit: string, who: string): Target =>
    a === null
      ? { what, ok: null, detail: "not measured in this run" }
      : { what, ok: a >= min, detail: `${who} ${fmt(a, unit)}${unit}` };
  // Issue 17's targets (round two); the first round's (S3 ≥ graphile-worker, S4 ≤ it, S9 ≥ 2× DBOS) are
  // implied by these.
  return [
    check(
      "S3 drain at concurrency 32 ≥ 2× graphile-worker",
      v("S3", "drain, concurrency 32", ok),
      v("S3", "drain, concurrency 32", "graphile-worker"),
      (a, b) => a >= 2 * b,
      "jobs/s",
    ),
    check(
      "S4 latency p50 ≤ 0.5× graphile-worker",
      v("S4", "latency p50", ok),
      v("S4", "latency p50", "graphile-worker"),
      (a, b) => a <= 0.5 * b,
      "ms",
    ),
    check(
      "S5 keyed drain ≥ 1.5× graphile-worker",
      v("S5", "keyed drain, concurrency 32", ok),
      v("S5", "keyed drain, concurrency 32", "graphile-worker"),
      (a, b) => a >= 1.5 * b,
      "jobs/s",
    ),
    check(
      "S9 3-step workflows, 32 at a time ≥ 5× DBOS",
      v("S9", "3-step workflows, 32 at a time", ok),
      v("S9", "3-step workflows, 32 at a time", "dbos"),
      (a, b) => a >= 5 * b,
      "wf/s",
    ),
    check(
      "S9 3-step workflows, 1 at a time ≥ 3× DBOS",
      v("S9", "3-step workflows, 1 at a time", ok),
      v("S9", "3-step workflows, 1 at a time", "dbos"),
      (a, b) => a >= 3 * b,
      "wf/s",
    ),
    check(
      "S9 sleep wake delay p50 ≤ DBOS",
      v("S9", "1 s sleep wake delay p50", ok),
      v("S9", "1 s sleep wake delay p50", "dbos"),
      (a, b) => a <= b,
      "ms",
    ),
    check(
      "S9 sleep wake delay p99 ≤ DBOS",
      v("S9", "1 s sleep wake delay p99", ok),
      v("S9", "1 s sleep wake delay p99", "dbos"),
      (a, b) => a <= b,
      "ms",
    ),
    ratioOf(
      "memory driver in an app, S3 concurrency 32 ≥ 200 000 jobs/s",
      v("S3", "drain, concurrency 32", "okengine-memory"),
      200_000,
      " jobs/s",
      "okengine (memory)",
    ),
    ratioOf(
      "S10 big tables: drain ≥ 0.9× empty tables",
      v("S10", "big tables: drain ÷ empty tables", ok),
      0.9,
      "×",
      "okengine",
    ),
    atMost(
      // Latency is lower-better: "≥ 0.9× the empty-table figure" means at most 1 / 0.9 of it.
      "S10 big tables: latency p50 within 1 / 0.9 of empty tables",
      v("S10", "big tables: latency p50 ÷ empty tables", ok),
      1 / 0.9,
      "×",
      "okengine",
    ),
    check(
      "S16 clock fire lag p99 ≤ 50 ms (target), 0 duplicates",
      v("S16", "fire lag p99 (slot → handler start)", ok),
      // The target itself stands in for a second system: the ratio reads as "× the target".
      v("S16", "fire lag p99 (slot → handler start)", ok) === null ? null : 50,
      (a, b) =>
        a <= b && r.figures.find((f) => f.scenario === "S16" && f.system === ok)?.checks?.duplicates === 0,
      "ms",
    ),
    atMost("S13 file driver ≤ 1 KB heap per parked run", s13("heap per parked run"), 1_024, "B"),
    atMost(
      `S13 file driver boot to ready ≤ 2 s (${r.sizes.s13Runs} parked)`,
      s13("boot to ready"),
      2_000,
      "ms",
    ),
  ];
}

/**
 * What the 1-minute load average said when the run began, before the bench itself added any: above
 * QUIET_LOAD something else was using the cores. A rule of thumb, not proof: work that started
 * later does not show here (the load at the end includes the bench's own).
 */
export const QUIET_LOAD = 0.5;
export const startLoadNote = (loadAtStart: readonly number[]): string =>
  (loadAtStart[0] ?? 0) > QUIET_LOAD
    ? "other work was running when it started"
    : "the machine was otherwise idle when it started";

const verdict = (t: Target): string => (t.ok === null ? "—" : t.ok ? "met" : "**missed**");

function machineLines(r: RunResult): string[] {
  const m = r.machine;
  const pgs = Object.entries(m.postgresSettings)
    .map(([k, v]) => `${k}=${v}`)
    .join(", ");
  return [
    `- Machine: ${m.cpus} × ${m.cpuModel}, ${m.memGiB} GiB RAM, ${m.os}; Node ${m.node}; load average ${m.loadAtStart.join(" / ")} at the start (${startLoadNote(m.loadAtStart)})`,
    `- PostgreSQL ${m.postgres} on the same machine (${pgs})`,
    `- Redis ${m.redis} on the same machine, persistence: ${m.redisPersistence}`,
    `- Peers: ${Object.entries(r.versions)
      .map(([k, v]) => `${k} ${v}`)
      .join(", ")}`,
  ];
}

export function markdownReport(r: RunResult, jsonName: string): string {
  const { header, rows } = matrix(r);
  const out: string[] = [
    `# okengine vs graphile-worker, pg-boss, BullMQ, DBOS — ${r.date} (${r.mode})`,
    "",
    `Run by \`npm run bench${r.mode === "quick" ? " -- --quick" : ""}\` in ${Math.round(r.seconds)} s. Raw figures: [${jsonName}](./${jsonName}).`,
    "",
    ...machineLines(r),
    "",
    "## Targets (okengine on PostgreSQL, same run)",
    "",
    "| target | result | figures |",
    "| --- | --- | --- |",
    ...targets(r).map((t) => `| ${t.what} | ${verdict(t)} | ${t.detail} |`),
    "",
    "## All figures",
    "",
    `Each cell: the median of ${r.sizes.repeats} run(s), and in brackets that figure ÷ okengine (postgres)'s. ↑ higher is better, ↓ lower is better. n/a: not applicable or not measured (see the notes below).`,
    "",
    mdTable(header, rows),
    "",
    "## Per scenario",
    "",
  ];
  for (const [id, title] of Object.entries(SCENARIOS) as Array<[ScenarioId, string]>) {
    const figs = r.figures.filter((f) => f.scenario === id);
    if (figs.length === 0) continue;
    out.push(
      `### ${title}`,
      "",
      "| system | metric | figure | × okengine (postgres) | samples | notes |",
      "| --- | --- | ---: | ---: | --- | --- |",
    );
    for (const f of figs) {
      const label = r.systems.find((s) => s.id === f.system)?.label ?? f.system;
      const x = ratio(f, r.figures, r.reference);
      out.push(
        `| ${label} | ${f.metric} | ${fmt(f.value, f.unit)} ${f.value === null ? "" : f.unit} | ${x === null ? "" : `${x.toFixed(2)}×`} | ${f.samples.map((s) => fmt(s, f.unit)).join(", ")} | ${(f.note ?? "").replace(/\|/g, "/")} |`,
      );
    }
    out.push("");
  }
  out.push(
    "## Sizes",
    "",
    "```json",
    JSON.stringify(r.sizes, null, 2),
    "```",
    "",
    "## Configuration of each system",
    "",
  );
  for (const s of r.systems) out.push(`- **${s.label}**`, ...s.config.map((c) => `  - ${c}`));
  out.push("", "## Method notes", "", ...r.notes.map((n) => `- ${n}`), "");
  return out.join("\n");
}

export function readmeSection(r: RunResult, mdName: string): string {
  const { header, rows } = matrix(r);
  return [
    "## Comparison with graphile-worker, pg-boss, BullMQ and DBOS",
    "",
    "`npm run bench` (full, ~27 min) or `npm run bench -- --quick` (~2 min) runs every scenario for every system against",
    "the local PostgreSQL (and Redis for BullMQ) and prints this table. A full run records `bench/results/<date>.json`",
    "and `.md` and rewrites this section; a quick run or `--no-readme` writes `bench/results/scratch/<date>T<time>[-quick].*`",
    "instead (git-ignored), so it never overwrites a recorded result.",
    "Peers live in `bench/package.json` and are installed on first use (`npm install --prefix bench`).",
    "Options: `--only=S3,S4`, `--systems=okengine-postgres,graphile-worker`, `--repeats=N`, `--no-readme`.",
    "Bench apps log warnings and errors as JSON lines on stderr (pino level `warn`, `bench/compare/logger.ts`; S6's",
    'planned failures, "fails on purpose", are withheld), and so do the child processes a run starts (their stderr is',
    "shown): an app that fails (a schema dropped under it, a store error) says so instead of skewing a figure silently.",
    "Drains count distinct jobs: a job handled twice is not progress, and a figure's note gives the duplicates.",
    "Full mode runs each S1–S6 and S9 measurement in a fresh Node process after an unmeasured warm-up pass at a tenth of its",
    'size (`--isolate` / `--in-process` force either way; `--quick` stays in one process): see "Memory in an app, second pass".',
    "",
    `Last run: ${r.date}, ${r.mode} mode — full report: [results/${mdName}](results/${mdName}).`,
    "",
    ...machineLines(r),
    "",
    "| target (okengine on PostgreSQL) | result | figures |",
    "| --- | --- | --- |",
    ...targets(r).map((t) => `| ${t.what} | ${verdict(t)} | ${t.detail} |`),
    "",
    `Median of ${r.sizes.repeats} run(s); in brackets: ÷ okengine (postgres). ↑ higher is better, ↓ lower is better.`,
    "",
    mdTable(header, rows),
    "",
  ].join("\n");
}

/**
 * Replaces this run's section in bench/README.md, keeping every other section, and formats the file with
 * the repository's prettier settings: the generated tables are not padded, so `prettier --check` (the
 * landing command) refused the README after every full run until it was formatted by hand.
 */
export async function updateReadme(file: string, section: string): Promise<void> {
  const text = existsSync(file) ? readFileSync(file, "utf8") : "# Benchmarks\n";
  const heading = section.split("\n", 1)[0]!;
  const start = text.indexOf(`${heading}\n`);
  let next: string;
  if (start === -1) next = `${text.trimEnd()}\n\n${section}`;
  else {
    const rest = text.slice(start + heading.length);
    const after = rest.search(/^## /m);
    next = text.slice(0, start) + section + (after === -1 ? "" : `\n${rest.slice(after)}`);
  }
  const prettier = await import("prettier");
  const options = (await prettier.resolveConfig(file)) ?? {};
  writeFileSync(file, await prettier.format(`${next.trimEnd()}\n`, { ...options, filepath: file }));
}

/**
 * Where a run's results go. Only a run that rewrites the README section (full mode, without
 * --no-readme) records bench/results/<date>.json and .md, the files that section links to; any other
 * run (quick, --no-readme) writes bench/results/scratch/<date and time>[-quick].* (git-ignored), so
 * trying something never overwrites a recorded result nor leaves a stray file to commit.
 */
export function resultsPlace(
  r: Pick<RunResult, "date" | "mode">,
  readme: boolean,
  taken: (stem: string) => boolean = () => false,
): { dir: "results" | "results/scratch"; stem: string } {
  const suffix = r.mode === "quick" ? "-quick" : "";
  // A second recorded run on one date gets the time too, so it does not overwrite the first.
  const day = `${r.date.slice(0, 10)}${suffix}`;
  if (readme)
    return { dir: "results", stem: taken(day) ? `${r.date.slice(0, 16).replace(/:/g, "-")}${suffix}` : day };
  // To the second, so scratch runs of one day sit side by side.
  return { dir: "results/scratch", stem: `${r.date.slice(0, 19).replace(/:/g, "-")}${suffix}` };
}

/**
 * Saves a run under bench/: results/<stem> and the README section when `readme` (a recorded full
 * run), results/scratch/<stamp> otherwise. What run.ts does at its end and record.ts does later.
 */
export async function saveRun(
  r: RunResult,
  readme: boolean,
  benchDir: string,
): Promise<{ dir: string; json: string; md: string }> {
  const place = resultsPlace(r, readme, (stem) => existsSync(join(benchDir, "results", `${stem}.json`)));
  const files = writeResults(join(benchDir, place.dir), r, place.stem);
  if (readme) await updateReadme(join(benchDir, "README.md"), readmeSection(r, files.md));
  return { dir: place.dir, ...files };
}

export function writeResults(dir: string, r: RunResult, stem: string): { json: string; md: string } {
  mkdirSync(dir, { recursive: true });
  const json = `${stem}.json`;
  const md = `${stem}.md`;
  writeFileSync(`${dir}/${json}`, `${JSON.stringify(r, null, 2)}\n`);
  writeFileSync(`${dir}/${md}`, markdownReport(r, json));
  return { json, md };
}
