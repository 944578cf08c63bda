/**
 * Records a full run made with --no-readme as if it had been made without: copies it from
 * bench/results/scratch/ to bench/results/ (same naming as run.ts) and rewrites the README section.
 * For a run started with --no-readme on purpose (say, while its figures were uncertain) that turned
 * out to be the one to keep.
 *
 *   node --import tsx bench/record.ts bench/results/scratch/<stamp>.json
 */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import * as report from "./compare/report.ts";
import type { RunResult } from "./compare/report.ts";

const file = process.argv[2];
if (file === undefined) throw new Error("usage: bench/record.ts bench/results/scratch/<stamp>.json");
const result = JSON.parse(readFileSync(file, "utf8")) as RunResult;
if (result.mode !== "full") throw new Error(`${file} is a ${result.mode} run: only full runs are recorded`);
const saved = await report.saveRun(result, true, fileURLToPath(new URL(".", import.meta.url)));
process.stdout.write(
  `wrote bench/${saved.dir}/${saved.json} and bench/${saved.dir}/${saved.md}; updated bench/README.md\n`,
);
