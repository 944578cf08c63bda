// A child process whose output lines tests can wait on (no sleeps: each line wakes the waiters).
import { spawn, type ChildProcess, type SpawnOptions } from "node:child_process";
import { createInterface } from "node:readline";

export interface Proc {
  child: ChildProcess;
  lines: string[];
  /** Resolves with the first line (printed already or to come) matching `re`; rejects if the process closes first. */
  line(re: RegExp): Promise<string>;
  /** Exit code once every line has been read. */
  exit: Promise<number | null>;
}

export function run(cmd: string, args: string[], options: SpawnOptions): Proc {
  const child = spawn(cmd, args, { stdio: ["ignore", "pipe", "pipe"], ...options });
  const lines: string[] = [];
  const waiters: Array<() => void> = [];
  let closed = false;
  const wake = (): void => {
    for (const w of waiters.splice(0)) w();
  };
  for (const stream of [child.stdout, child.stderr]) {
    if (stream) createInterface({ input: stream }).on("line", (l) => (lines.push(l), wake()));
  }
  const exit = new Promise<number | null>((r) =>
    child.once("close", (code) => {
      closed = true;
      wake();
      r(code);
    }),
  );
  const line = (re: RegExp): Promise<string> =>
    new Promise((resolve, reject) => {
      const check = (): void => {
        const hit = lines.find((l) => re.test(l));
        if (hit !== undefined) resolve(hit);
        else if (closed)
          reject(new Error(`${cmd} exited before printing ${String(re)}:\n${lines.join("\n")}`));
        else waiters.push(check);
      };
      check();
    });
  return { child, lines, line, exit };
}

/** Runs to completion; resolves with the exit code and everything printed. */
export async function runToEnd(
  cmd: string,
  args: string[],
  options: SpawnOptions,
): Promise<{ code: number | null; output: string }> {
  const p = run(cmd, args, options);
  const code = await p.exit;
  return { code, output: p.lines.join("\n") };
}

/** The environment of a user's shell: none of this test run's database, env or vitest variables. */
export function userEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (/^(VITEST|NODE_ENV$|DATABASE_URL|OKE_|npm_|FORCE_COLOR$)/.test(k)) continue;
    env[k] = v;
  }
  return { ...env, NO_COLOR: "1", ...extra };
}
