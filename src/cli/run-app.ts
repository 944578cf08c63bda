/** oke start: loads a project, boots its app, listens, and stops it gracefully on SIGINT/SIGTERM. */
import { createApp } from "../app/app.ts";
import type { App, Env, InstanceRole } from "../app/types.ts";
import { isLoopbackAddress as isLoopback } from "../console/config.ts";
import { isOkeError } from "../errors.ts";
import { describeBootError } from "./boot-error.ts";
import { loadProject, routeHandlerWarnings } from "../project/load-project.ts";

export interface RunOptions {
  env: Env;
  port?: number;
  host?: string;
  /** `--role`: wins over instance.role and OKE_ROLE. */
  role?: InstanceRole;
}

/** The bound address as a URL host (IPv6 in brackets). */
export const displayHost = (host: string): string => (host.includes(":") ? `[${host}]` : host);

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

/**
 * In dev, a flow exported from src/flows/ that nothing triggers is most often an `on(…)` left out:
 * it loads, gets a name, and every request for it answers 404. Said once per boot, in the app's log;
 * a flow another one declares in `effects.calls` is meant to be called, and is left out.
 */
function warnUntriggeredFlows(app: App): void {
  const called = new Set(app.manifest.flows.flatMap((f) => f.effects.calls));
  for (const f of app.manifest.flows) {
    if (f.triggers.length > 0 || !f.source?.startsWith("src/flows/") || called.has(f.name)) continue;
    app.logger.warn(
      { flow: f.name, source: f.source },
      `flow "${f.name}" (${f.source}) is exported without on(…), so no route, signal or clock runs it (only fx.call and app.invoke do): to serve it, export on(http.get(), flow({ … }))`,
    );
  }
}

/** `oke start` (and the child of `oke dev`): load, boot, listen, print the address, stop on a signal. */
export async function runApp(dir: string, options: RunOptions): Promise<void> {
  const project = await loadProject(dir);
  const app = createApp({
    modules: project.modules,
    config: project.config,
    env: options.env,
    root: project.root,
    ...(options.role === undefined ? {} : { role: options.role }),
  });
  exitOnSignals(app);
  if (options.env === "dev") {
    warnUntriggeredFlows(app);
    for (const w of routeHandlerWarnings(project.modules)) app.logger.warn({ source: w.source }, w.message);
  }
  const started = await app.start({ port: options.port, host: options.host }).catch((e: unknown) => {
    // SIGTERM while boot waited for the database: the signal's stop() exits (0), not a boot error (1).
    if (isOkeError(e) && e.code === "OKE1097") return undefined;
    throw e;
  });
  if (started === undefined) return;
  const { port, host } = started;
  // A role other than the default says so: a worker's port answers only its probes.
  const role =
    app.role === "all"
      ? ""
      : app.role === "web"
        ? ", role web: no background work"
        : ", role worker: /_/health and /_/ready only";
  console.log(`okengine listening on http://${displayHost(host)}:${port} (${options.env}${role})`);
  // A loopback-only production bind is right on a host behind a local proxy, and a surprise in a container.
  if (options.env === "prod" && isLoopback(host))
    console.log("okengine: loopback only; set HOST=0.0.0.0 to accept connections from other machines");
}
