/** oke dev: runs the app in a child process and restarts it when the project's files change. */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, statSync, watch, type FSWatcher } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { CliError } from "../project/load-project.ts";

export interface DevOptions {
  port?: number;
  host?: string;
  /** Quiet period after the last change before restarting. */
  debounceMs?: number;
  /** How long a child gets to stop after SIGTERM before SIGKILL. */
  killAfterMs?: number;
}

const BIN = fileURLToPath(new URL("../../bin/oke.js", import.meta.url));
const CONFIG = /^oke\.config\.[cm]?[jt]s$/;
const IGNORED = /(^|[\\/])(\.|node_modules[\\/])|~$|\.sw.$/;

/**
 * `oke dev`: a supervisor that runs the app in a child process (`oke __run`)
 * and restarts it when a file under src/ or oke.config.* changes. Restart =
 * SIGTERM, wait for the child to exit (it stops gracefully and frees the
 * port and the .oke/ lock), spawn again.
 */
export async function runDev(dir: string, options: DevOptions = {}): Promise<void> {
  const root = resolve(dir);
  if (!existsSync(root) || !statSync(root).isDirectory())
    throw new CliError(`oke: project directory "${dir}" not found`);
  const debounceMs = options.debounceMs ?? 100;
  const killAfterMs = options.killAfterMs ?? 15_000;
  const args = [BIN, "__run", root, "--env", "dev"];
  if (options.port !== undefined) args.push("--port", String(options.port));
  if (options.host !== undefined) args.push("--host", options.host);

  let child: ChildProcess | undefined;
  let stopping = false;
  let restarting: Promise<void> | undefined;
  let again = false;

  const start = (): void => {
    // Own process group: Ctrl-C reaches only the supervisor, which then stops the child once (not twice).
    const c = spawn(process.execPath, args, {
      stdio: ["ignore", "inherit", "inherit", "ipc"],
      detached: true,
      env: process.env,
    });
    child = c;
    c.once("exit", (code, signal) => {
      if (child === c && !stopping && restarting === undefined) {
        console.error(
          `oke dev: app exited (${signal ?? `code ${String(code)}`}); waiting for a change to restart`,
        );
      }
    });
  };

  const stopChild = async (): Promise<void> => {
    const c = child;
    if (!c || c.exitCode !== null || c.signalCode !== null) return;
    const exited = new Promise<void>((r) => c.once("exit", () => r()));
    c.kill("SIGTERM");
    const timer = setTimeout(() => c.kill("SIGKILL"), killAfterMs);
    await exited;
    clearTimeout(timer);
  };

  const restart = async (): Promise<void> => {
    do {
      again = false;
      console.log("oke dev: change detected, restarting");
      await stopChild();
      if (!stopping) start();
    } while (again && !stopping);
  };

  let timer: NodeJS.Timeout | undefined;
  const changed = (file: string | null): void => {
    if (stopping || (file !== null && IGNORED.test(file))) return;
    clearTimeout(timer);
    timer = setTimeout(() => {
      if (restarting !== undefined) {
        again = true;
        return;
      }
      restarting = restart()
        .catch((e: unknown) =>
          console.error(`oke dev: restart failed: ${e instanceof Error ? e.message : String(e)}`),
        )
        .finally(() => (restarting = undefined));
    }, debounceMs);
  };

  const watchers: FSWatcher[] = [];
  const src = join(root, "src");
  if (existsSync(src)) watchers.push(watch(src, { recursive: true }, (_event, file) => changed(file)));
  watchers.push(watch(root, (_event, file) => file !== null && CONFIG.test(file) && changed(file)));

  const shutdown = (): void => {
    if (stopping) {
      child?.kill("SIGKILL");
      process.exit(1);
    }
    stopping = true;
    clearTimeout(timer);
    for (const w of watchers) w.close();
    void Promise.resolve(restarting)
      .then(stopChild)
      .finally(() => process.exit(0));
  };
  process.on("SIGINT", shutdown);
  process.on("SIGTERM", shutdown);

  console.log(`oke dev: watching ${src} and oke.config.*`);
  start();
}
