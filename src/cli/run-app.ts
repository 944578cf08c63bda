import { createApp } from "../app/app.ts";
import { resolveConfig } from "../app/config.ts";
import type { App, Env } from "../app/types.ts";
import { describeBootError } from "./boot-error.ts";
import { loadProject } from "./load-project.ts";

export interface RunOptions {
  env: Env;
  port?: number;
  host?: string;
}

/** What to print for the bound address: a wildcard bind is reachable on loopback. */
export const displayHost = (host: string): string =>
  host === "0.0.0.0" || host === "::" || host === "" ? "127.0.0.1" : host.includes(":") ? `[${host}]` : host;

/** SIGINT/SIGTERM (or the dev supervisor going away) → graceful app.stop(), then exit. A second signal exits at once. */
function exitOnSignals(app: App): void {
  let stopping = false;
  const stop = (why: string): void => {
    if (stopping) {
      console.error(`oke: ${why} again, exiting without waiting`);
      process.exit(1);
    }
    stopping = true;
    app.stop().then(
      () => process.exit(0),
      (e: unknown) => {
        console.error(`oke: stop failed: ${describeBootError(e)}`);
        process.exit(1);
      },
    );
  };
  process.on("SIGINT", () => stop("SIGINT"));
  process.on("SIGTERM", () => stop("SIGTERM"));
  // Spawned by `oke dev`: the IPC channel closes when the supervisor dies, even by SIGKILL.
  if (process.send !== undefined) process.on("disconnect", () => stop("supervisor gone"));
}

/** `oke start` (and the child of `oke dev`): load, boot, listen, print the address, stop on a signal. */
export async function runApp(dir: string, options: RunOptions): Promise<void> {
  const project = await loadProject(dir);
  const app = createApp({
    modules: project.modules,
    config: project.config,
    env: options.env,
    root: project.root,
  });
  exitOnSignals(app);
  const { port } = await app.start({ port: options.port, host: options.host });
  const host = options.host ?? resolveConfig(project.config, options.env).host;
  console.log(`okengine listening on http://${displayHost(host)}:${port} (${options.env})`);
}
