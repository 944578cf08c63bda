/**
 * One S1–S6 or S9 measurement (scenario × system × round) in a fresh Node process, after an unmeasured
 * warm-up pass of the same scenario at a tenth of its size. In one long-lived bench process a
 * figure depended on what ran before it: the memory driver's S3 drain came out at 302k jobs/s in
 * round 1 and 99k–142k in rounds 2–3 of the same full run. The cause (bench/README.md, "Why the
 * memory rounds differ"): V8's heap state left by earlier scenarios — after the idle stretches of
 * S7/S11/S12 its memory reducer lowers the old-generation limit, so the next drain pays
 * mark-compacts and incremental marking over its own 100 000 preloaded jobs — and JIT tiering
 * still under way in a fresh process. A child per measurement plus a warm-up gives every system
 * the same start, whatever ran before.
 */
import { fork } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { forwardStderr } from "./logger.ts";
import { Progress } from "./progress.ts";
import type { QueueScenarioId } from "./queue-scenarios.ts";
import type { Ctx } from "./scenario-kit.ts";
import type { JournalDriverName } from "../../src/index.ts";
import type { Figure, Sizes, WorkflowSystem } from "./types.ts";

type ToParent =
  { t: "tick"; text: string } | { t: "figures"; figures: Figure[] } | { t: "error"; message: string };
interface Job {
  /** A queue scenario, or S9 (durable workflows: `system` is a workflow system's id). */
  scenario: QueueScenarioId | "S9";
  system: string;
  sizes: Sizes;
}

const CHILD = fileURLToPath(import.meta.url);

/** The sizes of the warm-up pass: a tenth of each count (at least a few), one repeat, same caps. */
export function warmupSizes(s: Sizes): Sizes {
  const tenth = (n: number, min: number): number => Math.max(min, Math.round(n / 10));
  return {
    ...s,
    s1: tenth(s.s1, 50),
    s2: tenth(s.s2, 500),
    s3: tenth(s.s3, 1_000),
    s4: tenth(s.s4, 50),
    s5Keys: tenth(s.s5Keys, 10),
    s6: tenth(s.s6, 100),
    s9: tenth(s.s9, 50),
    s9Sleeps: tenth(s.s9Sleeps, 5),
    repeats: 1,
  };
}

/** Runs one measurement in a child process; its progress ticks show on this process's line. */
export async function runIsolated(job: Job, ctx: Ctx): Promise<Figure[]> {
  const child = fork(CHILD, [JSON.stringify(job)], {
    execArgv: ["--import", "tsx"],
    stdio: ["ignore", "ignore", "pipe", "ipc"],
  });
  // The child's warnings show here; the rest of its stderr also explains an exit without figures.
  const stderr = forwardStderr(child.stderr);
  let figures: Figure[] | undefined;
  let failure: string | undefined;
  child.on("message", (m: ToParent) => {
    if (m.t === "tick") ctx.progress.tick(m.text);
    else if (m.t === "figures") figures = m.figures;
    else failure = m.message;
  });
  const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
  if (figures !== undefined) return figures;
  throw new Error(failure ?? `measurement process exited ${String(code)}: ${stderr().trim().slice(-300)}`);
}

/** Progress inside the child: ticks go to the parent's line. */
class ChildProgress extends Progress {
  constructor(private readonly lead: string) {
    super(1);
  }
  override tick(text: string): void {
    process.send!({ t: "tick", text: `${this.lead}${text}` } satisfies ToParent);
  }
  override note(text: string): void {
    this.tick(text);
  }
}

/** Child side: warm up, measure, hand the figures back. */
async function childMain(job: Job): Promise<Figure[]> {
  const measure = await scenarioOf(job);
  await measure({ sizes: warmupSizes(job.sizes), progress: new ChildProgress("warm-up: ") });
  return measure({ sizes: job.sizes, progress: new ChildProgress("") });
}

/** The scenario function of a job, bound to its system (looked up by id, as run.ts builds them). */
async function scenarioOf(job: Job): Promise<(ctx: Ctx) => Promise<Figure[]>> {
  const { scenario } = job;
  if (scenario === "S9") {
    const { s9 } = await import("./workflows.ts");
    const system = await workflowSystem(job.system);
    return (ctx) => s9(system, ctx);
  }
  const { QUEUE_SCENARIOS } = await import("./queue-scenarios.ts");
  const { queueSystem } = await import("./systems.ts");
  const system = queueSystem(job.system);
  return (ctx) => QUEUE_SCENARIOS[scenario](system, ctx);
}

async function workflowSystem(id: string): Promise<WorkflowSystem> {
  if (id === "dbos") {
    const { dbosWorkflows } = await import("./dbos.ts");
    const pkg = new URL("../node_modules/@dbos-inc/dbos-sdk/package.json", import.meta.url);
    return dbosWorkflows((JSON.parse(readFileSync(pkg, "utf8")) as { version: string }).version);
  }
  const { okengineWorkflows } = await import("./okengine-workflows.ts");
  return okengineWorkflows(id.replace(/^okengine-/, "") as JournalDriverName);
}

if (process.argv[1] === CHILD && process.send !== undefined) {
  // As in run.ts: DBOS's pg client prints a deprecation warning; okengine's timers are unref'd.
  process.noDeprecation = true;
  const keepAlive = setInterval(() => undefined, 1_000);
  const reply = (m: ToParent, code: number): void => {
    clearInterval(keepAlive);
    // exit once the message is out: peers may leave handles open that would keep the child alive.
    process.send!(m, () => process.exit(code));
  };
  childMain(JSON.parse(process.argv[2]!) as Job).then(
    (figures) => reply({ t: "figures", figures }, 0),
    (e: unknown) => reply({ t: "error", message: e instanceof Error ? e.message : String(e) }, 1),
  );
}
