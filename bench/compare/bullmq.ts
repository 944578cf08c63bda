/**
 * BullMQ 6 on the local Redis (bench/node_modules, ioredis client), one key
 * prefix per scenario run, deleted afterwards. Redis persistence is whatever
 * this machine's Redis is configured with (the report states it). Per-key FIFO
 * needs BullMQ Pro's groups, so S5 is n/a.
 */
import { REDIS, peer, randomName } from "./env.ts";
import type { JobSpec, QueueHarness, QueueSystem } from "./types.ts";

interface BJob {
  data: { n: number; j: number; key: string | null };
  attemptsMade: number;
}
interface BQueue {
  add(name: string, data: object, opts?: object): Promise<unknown>;
  addBulk(jobs: Array<{ name: string; data: object; opts?: object }>): Promise<unknown>;
  getFailedCount(): Promise<number>;
  getJobCounts(...types: string[]): Promise<Record<string, number>>;
  waitUntilReady(): Promise<unknown>;
  close(): Promise<void>;
}
interface BWorker {
  on(event: "error", fn: (e: unknown) => void): void;
  waitUntilReady(): Promise<unknown>;
  close(force?: boolean): Promise<void>;
}
interface BullModule {
  Queue: new (name: string, opts: object) => BQueue;
  Worker: new (name: string, processor: (job: BJob) => Promise<void>, opts: object) => BWorker;
}
interface RedisClient {
  scan(
    cursor: string,
    match: "MATCH",
    pattern: string,
    count: "COUNT",
    n: number,
  ): Promise<[string, string[]]>;
  del(...keys: string[]): Promise<number>;
  quit(): Promise<unknown>;
}

const QUEUE = "bench_jobs";
const connection = { ...REDIS, maxRetriesPerRequest: null };

export async function deletePrefix(prefix: string): Promise<void> {
  const { Redis } = await peer<{ Redis: new (o: object) => RedisClient }>("ioredis");
  const r = new Redis({ ...REDIS });
  try {
    let cursor = "0";
    do {
      const [next, keys] = await r.scan(cursor, "MATCH", `${prefix}:*`, "COUNT", 1_000);
      if (keys.length > 0) await r.del(...keys);
      cursor = next;
    } while (cursor !== "0");
  } finally {
    await r.quit();
  }
}

export function bullmqSystem(): QueueSystem {
  return {
    id: "bullmq",
    label: "BullMQ 6 (Redis)",
    backend: "redis",
    unsupported: { S5: "per-key FIFO needs groups, a BullMQ Pro feature (not open source)" },
    crashNote:
      "Worker lockDuration = 2 000 ms (renewed every 1 000 ms while the job runs), stalledInterval = 1 000 ms, maxStalledCount 1: another worker's stalled check moves the job back to wait",
    describe: () => [
      "Queue + Worker on ioredis (maxRetriesPerRequest null); Worker concurrency = the scenario's",
      "defaultJobOptions: attempts = retries + 1, no backoff, removeOnComplete true (the docs' auto-removal), removeOnFail false (the failed set is the dead-letter list)",
      "bulk enqueue = queue.addBulk(batch of 1 000)",
    ],
    async fresh() {
      const name = randomName("okbench");
      await deletePrefix(name);
      return { name };
    },
    async open(ns, o) {
      const { Queue, Worker } = await peer<BullModule>("bullmq");
      const queue = new Queue(QUEUE, {
        connection,
        prefix: ns.name,
        defaultJobOptions: { attempts: o.retries + 1, removeOnComplete: true, removeOnFail: false },
      });
      await queue.waitUntilReady();
      let worker: BWorker | undefined;
      const data = (job: JobSpec) => ({ n: job.n, j: job.j ?? 0, key: job.key ?? null });
      const harness: QueueHarness = {
        add: async (job) => {
          await queue.add("job", data(job));
        },
        addBulk: async (jobs) => {
          await queue.addBulk(jobs.map((job) => ({ name: "job", data: data(job) })));
        },
        start: async () => {
          worker = new Worker(
            QUEUE,
            async (job) => {
              await o.handler({
                n: job.data.n,
                j: job.data.j,
                key: job.data.key ?? undefined,
                attempt: job.attemptsMade + 1,
              });
            },
            {
              connection,
              prefix: ns.name,
              concurrency: o.concurrency,
              ...(o.leaseMs === undefined
                ? {}
                : { lockDuration: o.leaseMs, stalledInterval: Math.round(o.leaseMs / 2) }),
            },
          );
          worker.on("error", () => undefined);
          await worker.waitUntilReady();
        },
        deadCount: () => queue.getFailedCount(),
        remaining: async () => {
          const c = await queue.getJobCounts("waiting", "active", "delayed", "prioritized", "paused");
          return Object.values(c).reduce((a, b) => a + b, 0);
        },
        close: async () => {
          await worker?.close();
          await queue.close();
        },
      };
      return harness;
    },
    drop: (ns) => deletePrefix(ns.name),
  };
}
