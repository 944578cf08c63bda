/** The in-process queue scenarios by id (S1–S7), shared by run.ts and the per-measurement child (isolated.ts). */
import { s7 } from "./crash.ts";
import { s3, s5 } from "./drain.ts";
import { s1, s2 } from "./enqueue.ts";
import { s6 } from "./failures.ts";
import { s4 } from "./latency.ts";
import type { Ctx } from "./scenario-kit.ts";
import type { Figure, QueueSystem } from "./types.ts";

export const QUEUE_SCENARIOS = {
  S1: s1,
  S2: s2,
  S3: s3,
  S4: s4,
  S5: s5,
  S6: s6,
  S7: s7,
} as const satisfies Record<string, (system: QueueSystem, ctx: Ctx) => Promise<Figure[]>>;

export type QueueScenarioId = keyof typeof QUEUE_SCENARIOS;
