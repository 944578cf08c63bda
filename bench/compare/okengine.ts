/**
 * okengine as a queue, through its public API only: a `signal.once` bound to a
 * flow, `app.emit`, `app.boot`, `app.stop` — on the memory, file and postgres
 * journal drivers. The "store bulk" variant (S2 only) enqueues through
 * `app.store.enqueue([...])`, the driver's batch call, because the public API
 * has no bulk emit yet.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  createApp,
  flow,
  on,
  signal,
  type App,
  type JournalDriverName,
  type OnceSignal,
} from "../../src/index.ts";
import { DATABASE_URL, dropSchema, randomName, withClient } from "./env.ts";
import { benchLogger } from "./logger.ts";
import type { JobSpec, Namespace, QueueHarness, QueueOptions, QueueSystem } from "./types.ts";

interface Payload {
  n: number;
  j: number;
  key: string | null;
}

const SIGNAL = "bench.jobs";
// Warnings and errors on stderr: a silent logger hid a bench app's errors.
const logger = benchLogger();

/** The app config each driver gets; `ns` is a schema (postgres) or a directory (file). */
export function okengineConfig(
  driver: JournalDriverName,
  ns: Namespace,
  o: { concurrency: number; leaseMs?: number },
) {
  return {
    // Bench apps serve no operator Console: in prod without a token it would refuse to start, and say so at warn.
    console: { port: false as const },
    drivers: { journal: driver, send: "memory" as const },
    database: { url: DATABASE_URL, schema: ns.name },
    file: { dir: ns.name },
    // Claim batches of up to 500 even at concurrency 1: the size of graphile-worker's local queue in its
    // configuration here (graphile.ts), so both fetch the same amount per round trip.
    signals: {
      concurrency: o.concurrency,
      // S7 (short leases, a worker killed mid-run) keeps the default prefetch: prefetched messages are
      // leased too, and with a 2 s lease a deep buffer starts messages whose lease is nearly spent.
      prefetch: o.leaseMs === undefined ? Math.max(o.concurrency, 500) : o.concurrency,
      ...(o.leaseMs === undefined ? {} : { leaseMs: o.leaseMs }),
    },
  };
}

/** The bench module: one once signal and the flow bound to it. */
export function benchModule(o: Pick<QueueOptions, "retries" | "handler">): {
  sig: OnceSignal<Payload>;
  exports: Record<string, unknown>;
} {
  const sig = signal.once<Payload>(SIGNAL, { retries: o.retries });
  const work = on(
    sig,
    flow<Payload, void>("bench.job", {
      do: async (p, fx) => {
        await o.handler({ n: p.n, j: p.j, key: p.key ?? undefined, attempt: fx.attempt });
      },
    }),
  );
  return { sig, exports: { jobs: sig, work } };
}

const toPayload = (job: JobSpec): Payload => ({ n: job.n, j: job.j ?? 0, key: job.key ?? null });

class OkengineHarness implements QueueHarness {
  private seq = 0;
  constructor(
    private readonly app: App,
    private readonly sig: OnceSignal<Payload>,
    private readonly bulk: "emit" | "store",
    /** The postgres schema, when on postgres. */
    private readonly schema?: string,
  ) {}

  add(job: JobSpec): Promise<void> {
    return this.app.emit(this.sig, toPayload(job), job.key === undefined ? undefined : { key: job.key });
  }

  addBulk(jobs: JobSpec[]): Promise<void> {
    return this.bulk === "store"
      ? this.preload(jobs)
      : Promise.all(jobs.map((j) => this.add(j))).then(() => undefined);
  }

  /** The driver's batch enqueue: one call (one INSERT / one log record) per batch. */
  async preload(jobs: JobSpec[]): Promise<void> {
    await this.app.store.open();
    const now = this.app.clock.now();
    const prefix = `${now.toString(36)}-${process.pid}`;
    await this.app.store.enqueue(
      jobs.map((job) => ({
        id: `${prefix}-${++this.seq}`,
        signal: SIGNAL,
        key: job.key ?? null,
        payload: toPayload(job),
        parentRunId: null,
      })),
      now,
    );
  }

  start(): Promise<void> {
    return this.app.boot();
  }

  async deadCount(): Promise<number> {
    return (await this.app.store.stats(SIGNAL, this.app.clock.now())).dead;
  }

  /**
   * On postgres a direct count of the unfinished rows (the ready and inflight partial indexes), as the
   * graphile-worker and pg-boss harnesses count theirs: `stats()` also counts delivered rows, a scan of
   * every message of the signal, which the drain's 10 ms polling would pay at the finish line.
   */
  async remaining(): Promise<number> {
    if (this.schema !== undefined) {
      const schema = this.schema;
      return withClient(async (c) => {
        const { rows } = await c.query<{ n: string }>(
          `SELECT count(*) AS n FROM "${schema}".messages WHERE signal = $1 AND status IN ('pending', 'inflight')`,
          [SIGNAL],
        );
        return Number(rows[0]!.n);
      });
    }
    const s = await this.app.store.stats(SIGNAL, this.app.clock.now());
    return s.pending + s.inflight;
  }

  close(): Promise<void> {
    return this.app.stop({ timeoutMs: 5_000 });
  }
}

export function okengineSystem(driver: JournalDriverName, bulk: "emit" | "store" = "emit"): QueueSystem {
  const variant = bulk === "store" ? ", store bulk" : "";
  return {
    id: `okengine-${driver}${bulk === "store" ? "-store-bulk" : ""}`,
    label: `okengine (${driver}${variant})`,
    backend: driver,
    unsupported:
      driver === "memory" ? { S7: "the memory driver lives in one process: nothing survives a SIGKILL" } : {},
    ...(bulk === "store" ? { only: ["S2" as const] } : {}),
    crashNote:
      "signals.leaseMs = 2 000, signals.prefetch = concurrency (the default) (lazy reclaim: the surviving instance's pool arms one timer on the next lease expiry)",
    describe: () => [
      `journal driver ${driver}${driver === "postgres" ? " (pool 10, LISTEN/NOTIFY wake-ups)" : driver === "file" ? " (temp dir, fdatasync group commit)" : ""}`,
      "signal.once bound to one flow; signals.concurrency = the scenario's concurrency, signals.prefetch = max(concurrency, 500) (graphile's local queue size); retries = the scenario's",
      "signals.claimAtEmit = true (default): an emit with a free worker slot in the same process is written already claimed (postgres)",
      bulk === "store"
        ? "S2 through app.store.enqueue(batch of 1 000) — the driver's batch call, not public API"
        : "bulk enqueue = Promise.all(app.emit × 1 000) (no public bulk emit)",
      "env prod, pino logger at warn on stderr (planned failures withheld)",
    ],
    async fresh() {
      if (driver === "postgres") return { name: randomName("oke_bench") };
      if (driver === "file") return { name: await mkdtemp(join(tmpdir(), "oke_bench_")) };
      return { name: "memory" };
    },
    async open(ns, o) {
      const { sig, exports } = benchModule(o);
      const app = createApp({
        modules: [{ exports }],
        env: "prod",
        config: okengineConfig(driver, ns, o),
        logger,
        root: tmpdir(),
      });
      return new OkengineHarness(app, sig, bulk, driver === "postgres" ? ns.name : undefined);
    },
    async drop(ns) {
      if (driver === "postgres") await dropSchema(ns.name);
      if (driver === "file") await rm(ns.name, { recursive: true, force: true });
    },
  };
}
