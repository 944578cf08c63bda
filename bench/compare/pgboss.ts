/**
 * pg-boss 10 (bench/node_modules), one schema per scenario run. pg-boss
 * workers poll (no LISTEN): each `work()` worker fetches a batch, runs the
 * handler, and waits out the rest of `pollingIntervalSeconds` (minimum 0.5 s)
 * before the next fetch. Throughput therefore comes from batchSize: each
 * worker fetches 100 jobs and runs them one after another, and `concurrency`
 * workers run side by side — so `concurrency` handlers are in flight, like
 * the other systems.
 *
 * Per-key FIFO (S5): queue policy "singleton" (at most one active job per
 * singletonKey, enforced by a unique index) with singletonKey = key; fetch
 * order is created_on, id — a batch insert stamps one created_on, so S5 jobs
 * get time-ordered ids.
 */
import { randomBytes } from "node:crypto";
import { DATABASE_URL, dropSchema, peer, randomName, withClient } from "./env.ts";
import type { JobSpec, QueueHarness, QueueSystem } from "./types.ts";

interface BossJob {
  id: string;
  data: { n: number; j: number; key: string | null };
  retryCount?: number;
}
interface Boss {
  on(event: "error", fn: (e: unknown) => void): void;
  start(): Promise<unknown>;
  stop(o?: object): Promise<void>;
  createQueue(name: string, options?: object): Promise<void>;
  send(name: string, data: object, options?: object): Promise<string | null>;
  insert(jobs: object[]): Promise<void>;
  work(name: string, options: object, handler: (jobs: BossJob[]) => Promise<void>): Promise<string>;
}
type BossCtor = new (options: object) => Boss;

const QUEUE = "bench_jobs";
const DLQ = "bench_jobs_dead";
export const PGBOSS_BATCH = 100;
export const PGBOSS_POLL_S = 0.5;

/** uuid-shaped ids that sort like `seq` (pg compares uuids bytewise). */
function orderedIds(): () => string {
  const tail = randomBytes(6).toString("hex");
  let seq = 0;
  return () => {
    const h = (++seq).toString(16).padStart(20, "0");
    return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(12, 15)}-8${h.slice(15, 18)}-${h.slice(18, 20)}${tail.slice(2)}`;
  };
}

/**
 * Completions pg-boss lost to a deadlock, in this process. pg-boss 10.4.2's work() does not await
 * `complete()` (manager.js, onFetch: `this.complete(name, jobIds, …)` without await or catch), so a
 * completion that fails rejects unhandled and Node exits — S5's first rounds died so ("deadlock
 * detected … while updating tuple … in relation j…"). The cycle is pg-boss's own, with the singleton
 * policy: a fetch activating the next job of a key waits on the unique index job_i2 for the
 * completion of that key's active job, which waits for a row the fetch holds (server log: fetch
 * "while inserting index tuple … _i2", completion "while updating tuple"). Counted and shown in
 * the figure's note instead; any other unhandled rejection still ends the process.
 */
let lostCompletions = 0;
export const pgbossLostCompletions = (): number => lostCompletions;
let rejectionGuard = false;
function tolerateLostCompletions(): void {
  if (rejectionGuard) return;
  rejectionGuard = true;
  process.on("unhandledRejection", (reason) => {
    const e = reason as { code?: unknown; stack?: unknown } | undefined;
    if (e?.code === "40P01" && typeof e.stack === "string" && e.stack.includes("Manager.complete")) {
      lostCompletions++;
      process.stderr.write(`pg-boss: a completion was lost to a deadlock (${lostCompletions} so far)\n`);
      return;
    }
    throw reason;
  });
}

export function pgbossSystem(): QueueSystem {
  return {
    id: "pg-boss",
    label: "pg-boss 10",
    backend: "postgres",
    unsupported: {},
    crashNote:
      "queue expireInSeconds = 2 (the minimum is 1) with maintenanceIntervalSeconds = 1: the maintenance loop fails the expired active job, which is retried (retryLimit 3); batchSize 1 here, since a batch shares one expiry",
    describe: () => [
      "new PgBoss({ max: 10 (pool), schedule: false, supervise: true }); queue policy standard (S5: singleton + singletonKey = key)",
      `work(): one worker per unit of concurrency, batchSize ${PGBOSS_BATCH}, pollingIntervalSeconds ${PGBOSS_POLL_S} (the minimum); a batch's jobs run one after another`,
      "S6: retryLimit = retries, retryDelay 0, retryBackoff false, deadLetter queue, batchSize 1 (a batch fails or completes as a whole; see pgboss.ts)",
      "bulk enqueue = boss.insert(batch of 1 000)",
    ],
    async fresh() {
      return { name: randomName("pgboss_bench") };
    },
    async open(ns, o) {
      const { default: PgBoss } = await peer<{ default: BossCtor }>("pg-boss");
      tolerateLostCompletions();
      const lease =
        o.leaseMs === undefined ? {} : { expireInSeconds: Math.max(1, Math.round(o.leaseMs / 1000)) };
      const boss = new PgBoss({
        connectionString: DATABASE_URL,
        schema: ns.name,
        max: 10,
        schedule: false,
        supervise: true,
        ...(o.leaseMs === undefined ? {} : { maintenanceIntervalSeconds: 1 }),
      });
      const errors: unknown[] = [];
      boss.on("error", (e) => errors.push(e));
      await boss.start();
      await boss.createQueue(DLQ);
      await boss.createQueue(QUEUE, {
        policy: o.keyed ? "singleton" : "standard",
        retryLimit: o.retries,
        retryDelay: 0,
        retryBackoff: false,
        deadLetter: DLQ,
        ...lease,
      });
      // Batches are all-or-nothing and share one expiry timer: S6 (per-job failures) and S7 (a 2 s
      // expiry with 200 ms jobs) need batchSize 1. Failing one job of a batch by hand does not work
      // either: the batch's completion later completes that job's retry running in another worker
      // (measured: 44 of 100 dead letters lost).
      const batchSize = o.leaseMs === undefined && !o.expectFailures ? PGBOSS_BATCH : 1;
      const nextId = orderedIds();
      const data = (job: JobSpec) => ({ n: job.n, j: job.j ?? 0, key: job.key ?? null });
      const harness: QueueHarness = {
        add: async (job) => {
          await boss.send(QUEUE, data(job), job.key === undefined ? {} : { singletonKey: job.key });
        },
        addBulk: (jobs) =>
          boss.insert(
            jobs.map((job) => ({
              id: nextId(),
              name: QUEUE,
              data: data(job),
              ...(job.key === undefined ? {} : { singletonKey: job.key }),
            })),
          ),
        start: async () => {
          for (let i = 0; i < o.concurrency; i++) {
            await boss.work(
              QUEUE,
              { batchSize, pollingIntervalSeconds: PGBOSS_POLL_S, includeMetadata: true },
              async (jobs) => {
                // A throw fails the whole batch (pg-boss's batch contract); batches are only used where no job fails.
                for (const job of jobs)
                  await o.handler({
                    n: job.data.n,
                    j: job.data.j,
                    key: job.data.key ?? undefined,
                    attempt: (job.retryCount ?? 0) + 1,
                  });
              },
            );
          }
        },
        deadCount: () =>
          withClient(async (c) => {
            const { rows } = await c.query<{ n: string }>(
              `SELECT count(*) AS n FROM "${ns.name}".job WHERE name = $1`,
              [DLQ],
            );
            return Number(rows[0]!.n);
          }),
        remaining: () =>
          withClient(async (c) => {
            const { rows } = await c.query<{ n: string }>(
              `SELECT count(*) AS n FROM "${ns.name}".job WHERE name = $1 AND state < 'completed'`,
              [QUEUE],
            );
            return Number(rows[0]!.n);
          }),
        close: () => boss.stop({ graceful: true, wait: true, timeout: 5_000 }),
      };
      return harness;
    },
    drop: (ns) => dropSchema(ns.name),
  };
}
