// What boot and shutdown tell the operator: what the app serves, and what a stop left behind.
import type { Logger } from "../log/logger.ts";
import type { Manifest } from "./manifest.ts";

/**
 * One info line at boot listing routes, workers (signal → flow) and durable
 * flows, with their counts as the field `serves` for JSON logs (readable logs
 * leave it out: the message says it all, and dev printed it twice).
 */
export function logServes(logger: Logger, manifest: Manifest): void {
  const routes = manifest.routes.map((r) => `${r.method} ${r.path} → ${r.flow}`);
  const clocked = new Set(manifest.clocks.map((c) => c.signal));
  const workers = manifest.signals
    .filter((s) => !clocked.has(s.name))
    .flatMap((s) => s.flows.map((f) => `${s.name} (${s.delivery}) → ${f}`));
  const clocks = manifest.clocks.map(
    (c) =>
      `${c.name} (${c.cron === null ? `every ${c.every!}` : `cron "${c.cron}" ${c.timezone}`}) → ${c.flow}`,
  );
  const durable = manifest.flows.filter((f) => f.durable).map((f) => f.name);
  const section = (title: string, items: string[]): string[] =>
    items.length === 0 ? [] : [`  ${title}:`, ...items.map((i) => `    ${i}`)];
  const lines = [
    ...section("routes", routes),
    ...section("workers", workers),
    ...section("clocks", clocks),
    ...section("durable flows", durable),
  ];
  logger.info(
    {
      serves: {
        routes: routes.length,
        workers: workers.length,
        clocks: clocks.length,
        durableFlows: durable,
      },
    },
    lines.length === 0
      ? servesNothing(manifest)
      : `okengine serves ${routes.length} route(s), ${workers.length} worker(s), ${clocks.length === 0 ? "" : `${clocks.length} clock(s), `}${durable.length} durable flow(s)\n${lines.join("\n")}`,
  );
}

/**
 * The boot line of an instance that serves nothing, saying why in one line. An app whose flows are
 * bound to triggers reaches here only on an instance whose role leaves them all to others (the role
 * line before says which). Otherwise it says where the flows come from (the loader's folders for
 * `oke`, which src/app cannot ask: src/project/load-project.ts's PROJECT_FOLDERS and isTestFile) and
 * what makes one count, so "my flow is not there" is answered where it is first seen.
 */
function servesNothing(manifest: Manifest): string {
  const bound = manifest.flows.filter((f) => f.triggers.length > 0).length;
  if (bound > 0)
    return `okengine: this instance serves none of the app's ${bound} bound flow(s): its role leaves them to instances of another role`;
  const unbound = manifest.flows.length;
  return (
    "okengine: the app declares no routes, workers, clocks or durable flows. " +
    "oke loads src/signals/, src/channels/ and src/flows/ (not tests); createApp, the modules it is given. " +
    "A flow counts once bound with on(trigger, flow(…)) and exported: " +
    "export const hello = on(http.get(), flow({ … })) in src/flows/hello.ts serves GET /hello" +
    (unbound === 0 ? "" : `. ${unbound} flow(s) are exported without on(…)`)
  );
}

/** What a stop left unfinished at its deadline. */
export interface LeftAtStop {
  /** Once messages whose handler ran (or that were claimed and not started). */
  messageIds: string[];
  /** Durable runs still being driven. */
  runIds: string[];
  /** Broadcast copies (`<event id>/<flow>`) whose handler ran. */
  broadcastIds: string[];
  /** Other work the app started that had not ended: "retention sweep", "heartbeat", … */
  tasks: string[];
  leaseMs: number;
  durableLeaseMs: number;
}

/**
 * The last line of a stop: what it left for other instances (or the next
 * boot) to reclaim — once handlers whose messages are claimed again, and
 * durable runs resumed from their journal, each once its lease runs out —
 * with the ids as fields, and any other task the deadline cut off.
 */
export function logStopped(logger: Logger, left: LeftAtStop): void {
  const handlers = left.messageIds.length;
  const runs = left.runIds.length;
  const copies = left.broadcastIds.length;
  const said = [
    ...(handlers === 0
      ? []
      : [
          `${handlers} message handler(s) were still running; their messages are claimed again once their ${left.leaseMs} ms lease runs out`,
        ]),
    ...(runs === 0
      ? []
      : [
          `${runs} durable run(s) were still running; they resume from their journal (on another instance, or at the next boot) once their ${left.durableLeaseMs} ms lease runs out`,
        ]),
    ...(copies === 0
      ? []
      : [`${copies} broadcast handler(s) were still running; broadcast does not retry them`]),
    ...(left.tasks.length === 0 ? [] : [`still running at the deadline: ${left.tasks.join(", ")}`]),
  ];
  const fields = {
    leftForReclaim: handlers,
    durableRunsLeft: runs,
    ...(handlers === 0 ? {} : { messageIds: left.messageIds }),
    ...(runs === 0 ? {} : { runIds: left.runIds }),
    ...(copies === 0 ? {} : { broadcastIds: left.broadcastIds }),
    ...(left.tasks.length === 0 ? {} : { tasksLeft: left.tasks }),
  };
  const line =
    said.length === 0 ? "okengine stopped: nothing left running" : `okengine stopped: ${said.join(". ")}`;
  if (said.length === 0) logger.info(fields, line);
  else logger.warn(fields, line);
}
