/**
 * Every system of the comparison, by id — run.ts iterates them, and the S7
 * child process (crash-worker.ts) looks its system up here.
 */
import { bullmqSystem } from "./bullmq.ts";
import { graphileSystem } from "./graphile.ts";
import { okengineSystem } from "./okengine.ts";
import { pgbossSystem } from "./pgboss.ts";
import type { QueueSystem } from "./types.ts";

export function queueSystems(): QueueSystem[] {
  return [
    okengineSystem("memory"),
    okengineSystem("file"),
    okengineSystem("postgres"),
    okengineSystem("postgres", "store"),
    graphileSystem(),
    pgbossSystem(),
    bullmqSystem(),
  ];
}

/** The okengine system every ratio is taken against. */
export const REFERENCE = "okengine-postgres";

export function queueSystem(id: string): QueueSystem {
  const s = queueSystems().find((x) => x.id === id);
  if (!s) throw new Error(`bench: no system "${id}"`);
  return s;
}
