/** Replays at an operator-chosen rate: dead letters go back to their queue in timed batches, stoppable. */
import type { ConsoleHost } from "./host.ts";

export interface ReplayJob {
  id: number;
  signal: string;
  actor: string;
  rate: number;
  total: number;
  replayed: number;
  /** Ids that were no longer dead when their turn came (replayed or discarded meanwhile). */
  skipped: number;
  state: "running" | "done" | "stopped" | "failed";
  startedAt: number;
  error?: string;
}

const TICK_MS = 1_000;
const KEEP_FINISHED = 20;

export class ReplayJobs {
  private readonly jobs: ReplayJob[] = [];
  private readonly cancels = new Map<number, () => void>();
  private nextId = 1;

  constructor(
    private readonly host: ConsoleHost,
    private readonly onDone: (job: ReplayJob) => void,
  ) {}

  list(): ReplayJob[] {
    return this.jobs.map((j) => ({ ...j }));
  }

  /** Replays `ids` at `rate` per second: one batch now, the next a second later, and so on. */
  start(signal: string, ids: string[], rate: number, actor: string): ReplayJob {
    const job: ReplayJob = {
      id: this.nextId++,
      signal,
      actor,
      rate,
      total: ids.length,
      replayed: 0,
      skipped: 0,
      state: "running",
      startedAt: this.host.clock.now(),
    };
    this.jobs.push(job);
    while (this.jobs.length > KEEP_FINISHED && this.jobs[0]!.state !== "running") this.jobs.shift();
    const batch = Math.max(1, Math.floor(rate));
    let offset = 0;
    const tick = (): void => {
      this.cancels.delete(job.id);
      const chunk = ids.slice(offset, offset + batch);
      offset += chunk.length;
      this.host.operator.replay(signal, chunk).then(
        (done) => {
          job.replayed += done.length;
          job.skipped += chunk.length - done.length;
          if (job.state !== "running") return;
          if (offset >= ids.length) this.finish(job, "done");
          else this.cancels.set(job.id, this.host.clock.at(this.host.clock.now() + TICK_MS, tick));
        },
        (e: unknown) => {
          job.error = e instanceof Error ? e.message : String(e);
          this.finish(job, "failed");
        },
      );
    };
    tick();
    return { ...job };
  }

  private finish(job: ReplayJob, state: ReplayJob["state"]): void {
    job.state = state;
    this.cancels.get(job.id)?.();
    this.cancels.delete(job.id);
    this.onDone({ ...job });
  }

  /** Stops every running job (Console shutdown); what was replayed stays replayed. */
  stopAll(): void {
    for (const job of this.jobs) if (job.state === "running") this.finish(job, "stopped");
  }
}
