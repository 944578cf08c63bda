/**
 * What the queue scenarios (S1–S6) share: job lists, batching, a fresh
 * namespace per measurement (opened, closed and dropped), figures and repeats.
 * Throughput scenarios stop at `capSeconds` and report the rate so far (noted).
 */
import { median } from "./env.ts";
import type { Progress } from "./progress.ts";
import type {
  Figure,
  HandlerCall,
  JobSpec,
  QueueHarness,
  QueueOptions,
  QueueSystem,
  ScenarioId,
  Sizes,
} from "./types.ts";

export const BATCH = 1_000;

export type Ctx = { sizes: Sizes; progress: Progress };

export const jobs = (n: number): JobSpec[] => Array.from({ length: n }, (_, i) => ({ n: i }));

/** S5's jobs, emitted round-robin across keys so every key's messages interleave with the others'. */
export const keyedJobs = (keys: number, perKey: number): JobSpec[] => {
  const out: JobSpec[] = [];
  for (let j = 0; j < perKey; j++)
    for (let k = 0; k < keys; k++) out.push({ n: out.length, j, key: `k${k}` });
  return out;
};

/**
 * Jobs handled, by their `n` (0 ≤ n < total): a job handled again (a redelivery after a lease ran out,
 * a duplicate) is not progress, so it is counted apart; so is an `n` outside the list.
 */
export class JobTally {
  private readonly seen: Uint8Array;
  distinct = 0;
  duplicates = 0;
  outside = 0;
  constructor(readonly total: number) {
    this.seen = new Uint8Array(total);
  }

  /** Counts one handler call; true when it is the first of its job. */
  add(n: number): boolean {
    if (!Number.isInteger(n) || n < 0 || n >= this.total) {
      this.outside++;
      return false;
    }
    if (this.seen[n] === 1) {
      this.duplicates++;
      return false;
    }
    this.seen[n] = 1;
    this.distinct++;
    return true;
  }

  /** "; 3 duplicate handler calls" when there were any (a note's tail), else "". */
  note(): string {
    const parts = [
      this.duplicates > 0 ? `${this.duplicates} duplicate handler call(s)` : "",
      this.outside > 0 ? `${this.outside} call(s) for jobs not in the list` : "",
    ].filter(Boolean);
    return parts.length > 0 ? `; ${parts.join(", ")}` : "";
  }
}

export async function inBatches(
  all: JobSpec[],
  fn: (batch: JobSpec[]) => Promise<void>,
  tick?: (done: number) => void,
): Promise<void> {
  for (let i = 0; i < all.length; i += BATCH) {
    await fn(all.slice(i, i + BATCH));
    tick?.(Math.min(all.length, i + BATCH));
  }
}

/** Opens a fresh namespace, runs `fn`, always closes and drops. */
export async function withSystem<T>(
  system: QueueSystem,
  options: QueueOptions,
  fn: (h: QueueHarness) => Promise<T>,
): Promise<T> {
  const ns = await system.fresh();
  try {
    const h = await system.open(ns, options);
    try {
      return await fn(h);
    } finally {
      await h.close();
    }
  } finally {
    await system.drop(ns);
  }
}

export const noop = (): void => undefined;
export const base = (
  concurrency: number,
  handler: (c: HandlerCall) => Promise<void> | void = noop,
): QueueOptions => ({
  concurrency,
  retries: 3,
  keyed: false,
  handler,
});

export function figure(
  scenario: ScenarioId,
  metric: string,
  unit: string,
  better: Figure["better"],
  system: QueueSystem,
  samples: number[],
  extra: Partial<Figure> = {},
): Figure {
  return {
    scenario,
    metric,
    unit,
    better,
    system: system.id,
    value: samples.length ? median(samples) : null,
    samples,
    ...extra,
  };
}

export async function repeat(ctx: Ctx, fn: (round: number) => Promise<number>): Promise<number[]> {
  const out: number[] = [];
  for (let r = 0; r < ctx.sizes.repeats; r++) out.push(await fn(r));
  return out;
}
