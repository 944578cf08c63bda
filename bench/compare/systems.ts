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
    // S5 beside graphile-worker's default: with named queues its local queue idles up to its 2 s
    // pollInterval after a short fetch (bench/README.md "S5, third pass"), so the keyed comparison
    // also runs it tuned (100 ms) — the ratio against the peer that does not stall.
    { ...graphileSystem(100), only: ["S5"] },
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
