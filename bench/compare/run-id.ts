/** Names of a bench run's schemas and key prefixes, carrying the run's id, so one run's startup cleanup never drops another live run's. */
import { randomBytes } from "node:crypto";

/**
 * The id of the bench run this process belongs to: `r<pid>` of the process that started it. Set in
 * the environment at first use, so every child process (each spawned with the parent's environment)
 * names its schemas under the same run.
 */
export function benchRun(): string {
  const run = (process.env.BENCH_RUN ??= `r${process.pid}`);
  // It goes into unquoted SQL identifiers and NOTIFY channel names.
  if (!/^r[0-9]{1,10}$/.test(run)) throw new Error(`BENCH_RUN must be r<pid>, got ${JSON.stringify(run)}`);
  return run;
}

/** A fresh name under `prefix` for this run: `<prefix>_r<pid>_<8 hex>`. */
export const randomName = (prefix: string): string =>
  `${prefix}_${benchRun()}_${randomBytes(4).toString("hex")}`;

/** The pid of the run that made `name` (one of `prefixes`' names), or undefined for a name without one (made before runs were named). */
export function runPidOf(name: string, prefixes: readonly string[]): number | undefined {
  for (const prefix of prefixes) {
    if (!name.startsWith(`${prefix}_`)) continue;
    const m = /(?:^|_)r([0-9]{1,10})_[0-9a-f]{8}$/.exec(name.slice(prefix.length));
    return m === null ? undefined : Number(m[1]);
  }
  return undefined;
}

/** Whether a process with this pid lives on this machine (EPERM: it does, owned by someone else). */
export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * Which of `names` a run starting now may drop as leftovers: those of runs whose process is gone,
 * and those named before runs were (no run id). A live run's names are spared: two benches (or a
 * bench and a stand-alone script) can share the database. The database is this machine's (the
 * bench's default): a run on another machine against the same database would look dead here.
 */
export function leftoverNames(
  names: readonly string[],
  prefixes: readonly string[],
  alive: (pid: number) => boolean = pidAlive,
): string[] {
  return names.filter((name) => {
    const pid = runPidOf(name, prefixes);
    return pid === undefined || !alive(pid);
  });
}
