/** Boot's check that an instance does not join a fleet of another environment on one store (a dev instance on production's database). */
import { hostname } from "node:os";
import { ALIVE_MS } from "../console/heartbeat.ts";
import type { Clock } from "../clock/clock.ts";
import { OkeError } from "../errors.ts";
import type { Logger } from "../log/logger.ts";
import type { InstanceRecord } from "../store/console-types.ts";
import type { Store } from "../store/types.ts";
import type { Env } from "./config.ts";

/** How many instances a refusal or warning names (the rest are counted). */
const NAMED = 3;

/**
 * A heartbeat younger than ALIVE_MS whose process is gone: an instance of this host that was killed
 * (`oke start` then Ctrl-\, then `oke dev` on the same `.oke/` within 30 s) is not a live fleet.
 */
function deadHere(i: InstanceRecord): boolean {
  if (i.host !== hostname()) return false;
  try {
    process.kill(i.pid, 0);
    return false;
  } catch (e) {
    // EPERM: the process exists under another user, so it is alive.
    return (e as NodeJS.ErrnoException).code === "ESRCH";
  }
}

const named = (list: readonly InstanceRecord[]): string => {
  const shown = list.slice(0, NAMED).map((i) => `${i.host}:${i.pid}`);
  return list.length > NAMED ? `${shown.join(", ")} and ${list.length - NAMED} more` : shown.join(", ");
};

const instances = (n: number, env: string): string => `${n} live ${env} instance${n === 1 ? "" : "s"}`;

/**
 * Instances of every environment run the same flows, so any of them takes the others' queued
 * messages and due runs from a shared store: a dev instance pointed at production's DATABASE_URL
 * would run production's work with dev's drivers (a `console` channel prints the mail it should
 * send) and serve an open Console onto it. So a dev or test instance refuses to boot (OKE1084) while
 * a prod instance is alive on its store, before it takes anything; a prod instance only warns about
 * others (a stray laptop must not stop a deploy), and dev beside test warns too.
 */
export async function checkFleetEnv(d: {
  store: Store;
  clock: Clock;
  logger: Logger;
  env: Env;
  instanceId: string;
  /** Where the store is, for the message (the boot line's words). */
  where: string;
}): Promise<void> {
  const alive = (await d.store.listInstances(d.clock.now() - ALIVE_MS)).filter(
    (i) => i.id !== d.instanceId && i.env !== d.env && !deadHere(i),
  );
  if (alive.length === 0) return;
  const prod = alive.filter((i) => i.env === "prod");
  if (d.env !== "prod" && prod.length > 0)
    throw new OkeError({
      code: "OKE1084",
      message:
        `oke boot: ${instances(prod.length, "prod")} (${named(prod)}) use this store (${d.where}): ` +
        `this ${d.env} instance would take production's queued messages and runs`,
      fix:
        "Give it a database or schema of its own: another DATABASE_URL (or database.url), or database.schema in oke.config.ts " +
        '(e.g. env: { dev: { database: { schema: "dev_ada" } } }). An instance that is meant to work for production runs with env prod.',
    });
  for (const env of [...new Set(alive.map((i) => i.env))]) {
    const of = alive.filter((i) => i.env === env);
    d.logger.warn(
      { env: d.env, others: of.map((i) => ({ id: i.id, host: i.host, pid: i.pid, env: i.env })) },
      `okengine: ${instances(of.length, env)} (${named(of)}) share this store (${d.where}) with this ${d.env} instance: ` +
        "each takes the other's queued messages and runs; give one of them a database or schema of its own",
    );
  }
}
