/**
 * graphile-worker 0.17 (bench/node_modules), configured as its performance
 * page recommends for throughput: a local queue of 500, batched completion and
 * failure (delay 0), maxPoolSize max(10, concurrency + 2). One schema per
 * scenario run. Per-key FIFO (S5) uses `queueName` = key: graphile runs a
 * named queue's jobs one at a time, in order.
 */
import { DATABASE_URL, dropSchema, peer, randomName, withClient } from "./env.ts";
import type { JobSpec, QueueHarness, QueueSystem } from "./types.ts";

interface GwJob {
  attempts: number;
}
type GwTask = (payload: unknown, helpers: { job: GwJob }) => Promise<void> | void;
interface GwRunner {
  stop(): Promise<void>;
}
interface GwJobSpec {
  identifier: string;
  payload: unknown;
  queueName?: string;
  maxAttempts?: number;
}
interface GwUtils {
  addJob(
    identifier: string,
    payload: unknown,
    spec?: { queueName?: string; maxAttempts?: number },
  ): Promise<unknown>;
  addJobs(specs: GwJobSpec[]): Promise<unknown>;
  migrate(): Promise<void>;
  release(): Promise<void>;
}
interface GwModule {
  run(options: object): Promise<GwRunner>;
  makeWorkerUtils(options: object): Promise<GwUtils>;
  Logger: new (factory: () => () => void) => unknown;
}

const TASK = "bench_job";

export const graphileSettings = (concurrency: number) => ({
  concurrentJobs: concurrency,
  maxPoolSize: Math.max(10, concurrency + 2),
  localQueue: { size: 500 },
  completeJobBatchDelay: 0,
  failJobBatchDelay: 0,
});

/**
 * `pollIntervalMs` (default: graphile's own 2 000) is for bench/s5-ab.ts's sensitivity runs: with named
 * queues a fetch that comes back short leaves the local queue idle until the next poll, because a queue
 * freed by a completion sends no notification.
 */
export function graphileSystem(pollIntervalMs?: number): QueueSystem {
  return {
    id: pollIntervalMs === undefined ? "graphile-worker" : `graphile-worker-poll${pollIntervalMs}`,
    label:
      pollIntervalMs === undefined
        ? "graphile-worker 0.17"
        : `graphile-worker 0.17 (poll ${pollIntervalMs} ms)`,
    backend: "postgres",
    unsupported: {},
    crashNote:
      "no setting: graphile-worker frees the jobs of a worker that died without cleanup after a fixed 4 h lock timeout (sql: locked_at < now() - interval '4 hours')",
    describe: () => [
      "preset.worker: concurrentJobs = scenario concurrency, maxPoolSize = max(10, concurrency + 2), localQueue.size = 500, completeJobBatchDelay = 0, failJobBatchDelay = 0 (worker.graphile.org/docs/performance)",
      pollIntervalMs === undefined
        ? "pollInterval 2 000 ms (default; new jobs arrive by LISTEN/NOTIFY), prepared statements on"
        : `pollInterval ${pollIntervalMs} ms (tuned: a queue freed by a completion is found at the next poll), prepared statements on`,
      "S5: queueName = key (named queues run one job at a time, FIFO); S6: maxAttempts = retries + 1 (retry backoff is fixed at exp(attempt) s)",
      "bulk enqueue = workerUtils.addJobs(batch of 1 000)",
    ],
    async fresh() {
      const name = randomName("gw_bench");
      const gw = await peer<GwModule>("graphile-worker");
      const utils = await gw.makeWorkerUtils({
        connectionString: DATABASE_URL,
        schema: name,
        logger: new gw.Logger(() => () => undefined),
      });
      try {
        await utils.migrate();
      } finally {
        await utils.release();
      }
      return { name };
    },
    async open(ns, o) {
      const gw = await peer<GwModule>("graphile-worker");
      const logger = new gw.Logger(() => () => undefined);
      const utils = await gw.makeWorkerUtils({ connectionString: DATABASE_URL, schema: ns.name, logger });
      const maxAttempts = o.retries + 1;
      const spec = (job: JobSpec): GwJobSpec => ({
        identifier: TASK,
        payload: { n: job.n, j: job.j ?? 0, key: job.key ?? null },
        maxAttempts,
        ...(job.key === undefined ? {} : { queueName: job.key }),
      });
      let runner: GwRunner | undefined;
      const task: GwTask = async (payload, helpers) => {
        const p = payload as { n: number; j: number; key: string | null };
        await o.handler({ n: p.n, j: p.j, key: p.key ?? undefined, attempt: helpers.job.attempts });
      };
      const harness: QueueHarness = {
        add: async (job) => {
          const s = spec(job);
          await utils.addJob(TASK, s.payload, {
            maxAttempts,
            ...(s.queueName ? { queueName: s.queueName } : {}),
          });
        },
        addBulk: async (jobs) => {
          await utils.addJobs(jobs.map(spec));
        },
        start: async () => {
          const { concurrentJobs, maxPoolSize, ...worker } = graphileSettings(o.concurrency);
          runner = await gw.run({
            connectionString: DATABASE_URL,
            schema: ns.name,
            concurrency: concurrentJobs,
            maxPoolSize,
            noHandleSignals: true,
            taskList: { [TASK]: task },
            logger,
            preset: {
              worker: pollIntervalMs === undefined ? worker : { ...worker, pollInterval: pollIntervalMs },
            },
          });
        },
        deadCount: () =>
          withClient(async (c) => {
            const { rows } = await c.query<{ n: string }>(
              `SELECT count(*) AS n FROM "${ns.name}".jobs WHERE attempts >= max_attempts AND locked_at IS NULL`,
            );
            return Number(rows[0]!.n);
          }),
        // Completed jobs are deleted; what is left is waiting, locked, or failed.
        remaining: () =>
          withClient(async (c) => {
            const { rows } = await c.query<{ n: string }>(
              `SELECT count(*) AS n FROM "${ns.name}".jobs WHERE attempts < max_attempts OR locked_at IS NOT NULL`,
            );
            return Number(rows[0]!.n);
          }),
        close: async () => {
          await runner?.stop();
          await utils.release();
        },
      };
      return harness;
    },
    drop: (ns) => dropSchema(ns.name),
  };
}
