/** oke dev: runs the app in a child process and restarts it when the project's files change. */
import { spawn, type ChildProcess } from "node:child_process";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { checkProjectDir, isTestFile, isTestFolder } from "../project/load-project.ts";
import { watchTree, type TreeWatcherOptions } from "./watch-tree.ts";

export interface DevOptions {
  port?: number;
  host?: string;
  /** The app's instance role (`--role`), passed on to its process. */
  role?: "all" | "web" | "worker";
  /** Open the inspector in the app's process (`true`: Node's default, 127.0.0.1:9229; or `[host:]port`). */
  inspect?: string | true;
  /** The same, and break before the app's first line. */
  inspectBrk?: string | true;
  /** Quiet period after the last change before restarting. */
  debounceMs?: number;
  /** How long a child gets to stop after SIGTERM before SIGKILL. */
  killAfterMs?: number;
}

const BIN = fileURLToPath(new URL("../../bin/oke.js", import.meta.url));
/** Files at the project's top that change what the app is: its config, its package (the module type), its aliases. */
const TOP_FILES = /^(oke\.config\.[cm]?[jt]s|package\.json|tsconfig\.json)$/;
/** Dot-files and dot-folders, node_modules, editors' backups and swap files. */
const IGNORED = /(^|\/)(\.|node_modules(\/|$))|~$|\.sw.$/;

const underSrc = (rel: string): boolean => (rel === "src" || rel.startsWith("src/")) && !IGNORED.test(rel);

/**
 * What `oke dev` watches and restarts on: src/ (but the tests the loader skips: the app never loads
 * them, and a restart takes HTTP down for seconds) and the TOP_FILES. The loader's own predicates
 * decide what a test is, so the two never disagree.
 */
export const DEV_WATCH: TreeWatcherOptions = {
  descend: (rel) => rel === "" || (underSrc(rel) && !isTestFolder(rel)),
  relevant: (rel) => (underSrc(rel) ? !isTestFolder(rel) && !isTestFile(rel) : TOP_FILES.test(rel)),
};

const inspectFlag = (name: string, value: string | true | undefined): string[] =>
  value === undefined ? [] : [value === true ? `--${name}` : `--${name}=${value}`];

const INSPECT_OPTION = /(^|\s)--inspect(-brk|-wait)?(=\S*)?(?=\s|$)/g;

/**
 * `NODE_OPTIONS=--inspect npm run dev` opens an inspector in every Node process of the chain: npm's
 * (or npx's), this supervisor's, then the app's, which finds the port taken. The app's process gets
 * NODE_OPTIONS without it, and the supervisor says how to debug the app instead.
 */
function withoutInspect(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const options = (env.NODE_OPTIONS ?? "").trim();
  const stripped = options.replace(INSPECT_OPTION, "").trim();
  if (stripped === options) return env;
  console.error(
    "oke dev: the app's process ignores --inspect in NODE_OPTIONS: npm, npx and this supervisor are Node processes too, and the first of them took its port; to debug the app, run `oke dev --inspect` (`npm run dev -- --inspect`)",
  );
  return { ...env, NODE_OPTIONS: stripped };
}

/**
 * `oke dev`: a supervisor that runs the app in a child process (`oke __run`)
 * and restarts it when a file under src/ (tests excepted), oke.config.*, package.json or tsconfig.json changes. Restart =
 * SIGTERM, wait for the child to exit (it stops gracefully and frees the
 * port and the .oke/ lock), spawn again.
 */
export async function runDev(dir: string, options: DevOptions = {}): Promise<void> {
  const root = checkProjectDir(dir);
  const debounceMs = options.debounceMs ?? 100;
  const killAfterMs = options.killAfterMs ?? 15_000;
  const env = withoutInspect(process.env);
  // The inspector goes to the app's process only: the supervisor runs none of the project's code.
  const args = [
    ...inspectFlag("inspect", options.inspect),
    ...inspectFlag("inspect-brk", options.inspectBrk),
    BIN,
    "__run",
    root,
    "--env",
    "dev",
  ];
  if (options.port !== undefined) args.push("--port", String(options.port));
  if (options.host !== undefined) args.push("--host", options.host);
  if (options.role !== undefined) args.push("--role", options.role);

  let child: ChildProcess | undefined;
  let stopping = false;
  let restarting: Promise<void> | undefined;
  let again = false;

  const start = (): void => {
    // Own process group: Ctrl-C reaches only the supervisor, which then stops the child once (not twice).
    const c = spawn(process.execPath, args, {
      stdio: ["ignore", "inherit", "inherit", "ipc"],
      detached: true,
      env,
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
  const changed = (): void => {
    if (stopping) return;
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

  const watcher = watchTree(root, DEV_WATCH, changed);

  const shutdown = (): void => {
    if (stopping) {
      child?.kill("SIGKILL");
      process.exit(1);
    }
    stopping = true;
    clearTimeout(timer);
    watcher.close();
    void Promise.resolve(restarting)
      .then(stopChild)
      .finally(() => process.exit(0));
  };
  process.on("SIGINT", shutdown);
  process.on("SIGTERM", shutdown);

  console.log(`oke dev: watching ${join(root, "src")}, oke.config.*, package.json and tsconfig.json`);
  start();
}
