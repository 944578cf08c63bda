// Spawns child-app processes for the process tests and reads their reports.
import { spawn, type ChildProcess } from "node:child_process";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { bundledChild } from "../support/bundled-child.ts";

const CHILD = fileURLToPath(new URL("./child-app.ts", import.meta.url));

export interface ChildEvent {
  pid: number;
  event: string;
  [k: string]: unknown;
}

/** The whole environment of a test child: `env` and the PATH to find tools, nothing inherited. */
export function childEnv(env: Record<string, string>): Record<string, string> {
  return { PATH: process.env.PATH ?? "/usr/bin:/bin", ...env };
}

/** A child app process and the JSON events it printed. */
export class Child {
  readonly events: ChildEvent[] = [];
  readonly proc: ChildProcess;
  readonly exited: Promise<number | null>;
  private waiters: Array<() => void> = [];
  stderr = "";

  /**
   * `script`: another child program than child-app.ts (same JSON-lines protocol). The child gets
   * exactly `env` plus PATH, never the parent's environment: a DATABASE_URL (or any OKE_ setting) of
   * the developer's shell can never reach a test process.
   */
  constructor(env: Record<string, string>, script = CHILD) {
    // Bundled once per test process (test/support/bundled-child.ts): a start under tsx costs ~0.9 s
    // more CPU, paid again by every kill's replacement.
    this.proc = spawn(process.execPath, [bundledChild(script)], {
      env: childEnv(env),
      stdio: ["ignore", "pipe", "pipe"],
    });
    createInterface({ input: this.proc.stdout! }).on("line", (line) => {
      try {
        this.events.push(JSON.parse(line) as ChildEvent);
      } catch {
        return;
      }
      for (const w of this.waiters.splice(0)) w();
    });
    this.proc.stderr!.on("data", (d: Buffer) => (this.stderr += d.toString()));
    this.exited = new Promise((r) => this.proc.on("exit", (code) => r(code)));
  }

  /** Resolves with the first event matching `pred`, waiting for it if needed. */
  async waitFor(pred: (e: ChildEvent) => boolean, what: string, timeoutMs = 30_000): Promise<ChildEvent> {
    const end = Date.now() + timeoutMs;
    for (;;) {
      const hit = this.events.find(pred);
      if (hit) return hit;
      if (Date.now() > end)
        throw new Error(
          `child ${this.proc.pid}: timed out waiting for ${what}; stderr: ${this.stderr.slice(-2000)}`,
        );
      await Promise.race([
        new Promise<void>((r) => this.waiters.push(r)),
        this.exited.then(() => {
          throw new Error(
            `child ${this.proc.pid} exited while waiting for ${what}; stderr: ${this.stderr.slice(-2000)}`,
          );
        }),
        new Promise((r) => setTimeout(r, 200)),
      ]);
    }
  }

  /** True once the process has exited (on its own or killed). */
  get dead(): boolean {
    return this.proc.exitCode !== null || this.proc.signalCode !== null;
  }

  kill(signal: NodeJS.Signals = "SIGKILL"): Promise<number | null> {
    this.proc.kill(signal);
    return this.exited;
  }
}
