/**
 * S7: two worker processes (A and B) share one queue; A is SIGKILLed while it
 * has jobs in flight. Measured: the time from the kill until the last of A's
 * in-flight jobs starts again elsewhere, how many jobs ran to completion more
 * than once (duplicates) and how many never completed (lost / stranded).
 *
 * The file driver allows one process per directory, so there B is started
 * right after the kill (its figure includes B's boot).
 */
import { fork, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";
import type { ToChild, ToParent } from "./crash-worker.ts";
import { signalled, sleep, until, type Signalled } from "./env.ts";
import { forwardStderr } from "./logger.ts";
import type { Progress } from "./progress.ts";
import type { Figure, QueueSystem, Sizes } from "./types.ts";

export const LEASE_MS = 2_000;
export const JOB_MS = 200;
export const CRASH_CONCURRENCY = 4;
const WORKER = fileURLToPath(new URL("./crash-worker.ts", import.meta.url));

interface Worker {
  name: "A" | "B";
  child: ChildProcess;
  ready: Promise<void>;
  exited: Promise<void>;
  send(m: ToChild): void;
}

interface Tally {
  starts: Map<number, Array<{ by: "A" | "B"; at: number }>>;
  done: Map<number, number>;
  inflightA: Set<number>;
  startsA: number;
  enqueued: Signalled<void>;
  errors: string[];
}

function spawnWorker(name: "A" | "B", system: QueueSystem, ns: string, tally: Tally): Worker {
  const child = fork(WORKER, [system.id, ns, String(LEASE_MS), String(CRASH_CONCURRENCY), String(JOB_MS)], {
    execArgv: ["--import", "tsx"],
    stdio: ["ignore", "ignore", "pipe", "ipc"],
  });
  const ready = signalled();
  const exited = new Promise<void>((r) => child.once("exit", () => r()));
  // Shown as it comes; what is not a warning counts as the worker's error.
  const stderr = forwardStderr(child.stderr);
  void exited.then(() => {
    const errors = stderr().trim();
    if (errors) tally.errors.push(`${name}: ${errors.split("\n").slice(-3).join(" | ")}`);
  });
  child.on("message", (m: ToParent) => {
    const at = performance.now();
    if (m.t === "ready") ready.resolve();
    else if (m.t === "enqueued") tally.enqueued.resolve();
    else if (m.t === "error") tally.errors.push(`${name}: ${m.message}`);
    else if (m.t === "start") {
      const list = tally.starts.get(m.n) ?? [];
      list.push({ by: name, at });
      tally.starts.set(m.n, list);
      if (name === "A") {
        tally.startsA++;
        tally.inflightA.add(m.n);
      }
    } else if (m.t === "done") {
      tally.done.set(m.n, (tally.done.get(m.n) ?? 0) + 1);
      if (name === "A") tally.inflightA.delete(m.n);
    }
  });
  return {
    name,
    child,
    ready: Promise.race([
      ready.promise,
      exited.then(() => Promise.reject(new Error(`worker ${name} exited: ${tally.errors.join("; ")}`))),
    ]),
    exited,
    send: (m) => child.send(m),
  };
}

async function stopWorker(w: Worker | undefined): Promise<void> {
  if (!w || w.child.exitCode !== null || w.child.signalCode !== null) return;
  w.send({ t: "stop" });
  const stopped = await Promise.race([w.exited.then(() => true), sleep(8_000).then(() => false)]);
  if (!stopped) {
    w.child.kill("SIGKILL");
    await w.exited;
  }
}

export async function s7(system: QueueSystem, ctx: { sizes: Sizes; progress: Progress }): Promise<Figure[]> {
  const n = ctx.sizes.s7Jobs;
  const waitMs = ctx.sizes.s7WaitSeconds * 1_000;
  const ns = await system.fresh();
  const tally: Tally = {
    starts: new Map(),
    done: new Map(),
    inflightA: new Set(),
    startsA: 0,
    enqueued: signalled(),
    errors: [],
  };
  /** S7's one figure: kill → the last of A's in-flight jobs running again in B (null: not measured), with the workers' errors. */
  const figure = (value: number | null, note: string, checks?: Figure["checks"]): Figure[] => [
    {
      scenario: "S7",
      metric: "SIGKILL → job runs again",
      unit: "s",
      better: "lower",
      system: system.id,
      value,
      samples: value === null ? [] : [value],
      note: tally.errors.length ? `${note}; errors: ${tally.errors.join("; ").slice(0, 300)}` : note,
      ...(checks ? { checks } : {}),
    },
  ];
  let a: Worker | undefined;
  let b: Worker | undefined;
  const single = system.backend === "file";
  try {
    a = spawnWorker("A", system, ns.name, tally);
    await a.ready;
    if (!single) {
      b = spawnWorker("B", system, ns.name, tally);
      await b.ready;
    }
    a.send({ t: "enqueue", count: n });
    await tally.enqueued.promise;
    // Kill A once it has done a quarter of the work and holds jobs mid-run.
    const armed = await until(() => tally.startsA >= n / 4 && tally.inflightA.size > 0, waitMs, 2);
    // A peer whose other worker hoards the queue (graphile-worker's local queue) may never let A start a
    // quarter of the jobs: kill A anyway if it holds any, and say so in the note. Holding none, there is
    // nothing to measure, which is n/a with the reason rather than a harness failure.
    if (!armed && tally.inflightA.size === 0)
      return figure(
        null,
        `n/a: worker A started ${tally.startsA} of ${n} jobs and held none in flight after ${ctx.sizes.s7WaitSeconds} s (the other worker took them first)` +
          (system.crashNote ? `; ${system.crashNote}` : ""),
      );
    const early = armed
      ? ""
      : `killed after A had started only ${tally.startsA} jobs (the other worker held the rest); `;
    const killedAt = performance.now();
    a.child.kill("SIGKILL");
    await a.exited;
    // Reports A sent just before the kill may still be in the pipe: let them land before taking the set.
    await sleep(100);
    const inflight = [...tally.inflightA];
    if (single) {
      b = spawnWorker("B", system, ns.name, tally);
      await b.ready;
    }
    const rerunAt = (job: number): number | undefined =>
      tally.starts.get(job)?.find((s) => s.by === "B" && s.at > killedAt)?.at;
    const allDone = (): boolean => {
      ctx.progress.tick(
        `${tally.done.size} / ${n} done, ${inflight.filter((j) => rerunAt(j) !== undefined).length} / ${inflight.length} re-run`,
      );
      return tally.done.size >= n && inflight.every((j) => rerunAt(j) !== undefined);
    };
    await until(allDone, waitMs, 10);
    await sleep(JOB_MS * 2); // a late duplicate would land here
    const reruns = inflight.map(rerunAt);
    const rerunTimes = reruns.filter((t): t is number => t !== undefined);
    const recovered = rerunTimes.length === reruns.length;
    const recoverS = recovered ? (Math.max(...rerunTimes) - killedAt) / 1_000 : null;
    let duplicates = 0;
    for (const c of tally.done.values()) duplicates += Math.max(0, c - 1);
    const lost = n - tally.done.size;
    const stranded = reruns.filter((t) => t === undefined).length;
    const checks = {
      jobs: n,
      inflightAtKill: inflight.length,
      rerun: inflight.length - stranded,
      duplicates,
      notCompleted: lost,
    };
    const note =
      early +
      (recovered
        ? `${inflight.length} in flight at the kill, all re-run; ${duplicates} duplicate completions, ${lost} not completed`
        : `${stranded} of ${inflight.length} in-flight jobs not re-run within ${ctx.sizes.s7WaitSeconds} s; ${lost} of ${n} jobs not completed; ${duplicates} duplicates`);
    return figure(recoverS, note, checks);
  } finally {
    if (a && a.child.exitCode === null && a.child.signalCode === null) a.child.kill("SIGKILL");
    await stopWorker(b);
    await system.drop(ns);
  }
}
