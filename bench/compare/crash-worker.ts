/**
 * S7's worker process: opens one system on the namespace it is given, runs
 * jobs that take JOB_MS each, and reports every handler start and end to the
 * parent over IPC (the parent timestamps them on receipt). The parent
 * SIGKILLs one of these mid-job.
 *
 *   node --import tsx bench/compare/crash-worker.ts <system id> <namespace> <leaseMs> <concurrency> <jobMs>
 */
import { sleep } from "./env.ts";
import { queueSystem } from "./systems.ts";
import type { JobSpec } from "./types.ts";

export type ToParent =
  | { t: "ready" }
  | { t: "start"; n: number; attempt: number }
  | { t: "done"; n: number }
  | { t: "enqueued" }
  | { t: "error"; message: string };
export type ToChild = { t: "enqueue"; count: number } | { t: "stop" };

const [id, ns, leaseMs, concurrency, jobMs] = process.argv.slice(2);
const send = (m: ToParent): void => {
  process.send?.(m);
};

async function main(): Promise<void> {
  const system = queueSystem(id!);
  const h = await system.open(
    { name: ns! },
    {
      concurrency: Number(concurrency),
      retries: 3,
      keyed: false,
      leaseMs: Number(leaseMs),
      handler: async (c) => {
        send({ t: "start", n: c.n, attempt: c.attempt });
        await sleep(Number(jobMs));
        send({ t: "done", n: c.n });
      },
    },
  );
  process.on("message", (m: ToChild) => {
    if (m.t === "enqueue") {
      const jobs: JobSpec[] = Array.from({ length: m.count }, (_, n) => ({ n }));
      h.addBulk(jobs).then(
        () => send({ t: "enqueued" }),
        (e: unknown) => send({ t: "error", message: String(e) }),
      );
    } else if (m.t === "stop") {
      h.close().then(
        () => process.exit(0),
        () => process.exit(1),
      );
    }
  });
  await h.start();
  send({ t: "ready" });
}

main().catch((e: unknown) => {
  send({ t: "error", message: e instanceof Error ? (e.stack ?? e.message) : String(e) });
  process.exit(1);
});
