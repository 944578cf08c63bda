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
  /** When the next batch is due (epoch ms); null while a batch is under way and once the job ended. */
  nextAt: number | null;
  error?: string;
}

const TICK_MS = 1_000;
const KEEP_FINISHED = 20;

export class ReplayJobs {
  private readonly jobs: ReplayJob[] = [];
  private readonly cancels = new Map<number, () => void>();
  /** Batches sent to the store and not answered yet: settled() waits for them. */
  private readonly inFlight = new Set<Promise<void>>();
  private nextId = 1;

  constructor(
    private readonly host: ConsoleHost,
    private readonly onDone: (job: ReplayJob) => void,
  ) {}

  list(): ReplayJob[] {
    return this.jobs.map((j) => ({ ...j }));
  }

  /**
   * Replays `ids` at `rate` per second: one batch now, the next a period later, and so on. A rate of
   * one or more ticks every second and keeps the running total at rate × ticks (2.5/s: 2, 3, 2, 3 …);
   * a rate under one replays one message every 1/rate seconds (0.5/s: one every 2 s).
   */
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
      nextAt: null,
    };
    this.jobs.push(job);
    // The oldest finished jobs go past KEEP_FINISHED, wherever they stand: a long job still running at
    // the head of the list no longer keeps every later finished one.
    let finished = this.jobs.filter((j) => j.state !== "running").length;
    for (let i = 0; finished > KEEP_FINISHED && i < this.jobs.length;)
      if (this.jobs[i]!.state !== "running") {
        this.jobs.splice(i, 1);
        finished--;
      } else i++;
    const periodMs = rate >= 1 ? TICK_MS : Math.ceil(TICK_MS / rate);
    const perPeriod = rate >= 1 ? rate : 1;
    let ticks = 0;
    let offset = 0;
    const tick = (): void => {
      this.cancels.delete(job.id);
      // Stopped since this tick was armed: no batch goes out after stopAll().
      if (job.state !== "running") return;
      job.nextAt = null;
      ticks++;
      // Total due by this tick (the epsilon: 100 × 1.13 is 112.99999999999999 in floating point).
      const due = Math.min(ids.length, Math.floor(ticks * perPeriod + 1e-9));
      const chunk = ids.slice(offset, due);
      offset += chunk.length;
      const batch = this.host.operator.replay(signal, chunk).then(
        (done) => {
          job.replayed += done.length;
          job.skipped += chunk.length - done.length;
          if (job.state !== "running") return;
          if (offset >= ids.length) this.finish(job, "done");
          else {
            // A period after this batch finished: a slow store makes the rate lower, never a burst.
            job.nextAt = this.host.clock.now() + periodMs;
            this.cancels.set(job.id, this.host.clock.at(job.nextAt, tick));
          }
        },
        (e: unknown) => {
          job.error = e instanceof Error ? e.message : String(e);
          // A batch failing after stopAll() (the store closing under it) leaves the job stopped: it ended once.
          if (job.state === "running") this.finish(job, "failed");
        },
      );
      this.inFlight.add(batch);
      void batch.finally(() => this.inFlight.delete(batch));
    };
    tick();
    return { ...job };
  }

  private finish(job: ReplayJob, state: ReplayJob["state"]): void {
    job.state = state;
    job.nextAt = null;
    this.cancels.get(job.id)?.();
    this.cancels.delete(job.id);
    this.onDone({ ...job });
  }

  /**
   * Stops one job (an operator's call): no batch goes out after this, one already sent still lands.
   * Returns the job as it stands (a finished one unchanged) and whether this call stopped it, or
   * undefined for an unknown id.
   */
  stop(id: number): { job: ReplayJob; stopped: boolean } | undefined {
    const job = this.jobs.find((j) => j.id === id);
    if (job === undefined) return undefined;
    const stopped = job.state === "running";
    if (stopped) this.finish(job, "stopped");
    return { job: { ...job }, stopped };
  }

  /**
   * Stops every running job (Console shutdown); what was replayed stays replayed. A batch already
   * sent still lands (settled() waits for it), and none goes out after this.
   */
  stopAll(): void {
    for (const job of this.jobs) if (job.state === "running") this.finish(job, "stopped");
  }

  /** Resolves once no batch is out at the store: await it after stopAll(), before the store closes. */
  async settled(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight]);
  }
}
