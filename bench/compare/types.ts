/**
 * The shapes every system adapter and scenario of `npm run bench` share.
 * Peers (graphile-worker, pg-boss, BullMQ, DBOS) are loaded at run time from
 * bench/node_modules, so nothing here names their types.
 */

export type ScenarioId =
  | "S1"
  | "S2"
  | "S3"
  | "S4"
  | "S5"
  | "S6"
  | "S7"
  | "S9"
  | "S10"
  | "S11"
  | "S12"
  | "S13"
  | "S14"
  | "S15"
  | "S16";

/** One job as the scenarios see it: its number, optional FIFO key. Payload is `{ n, j }`. */
export interface JobSpec {
  n: number;
  /** Position within its key (S5), else 0. */
  j?: number;
  key?: string;
}

export interface HandlerCall {
  n: number;
  j: number;
  key: string | undefined;
  /** 1-based attempt as the system reports it (or counted by the scenario). */
  attempt: number;
}

export interface QueueOptions {
  /** Handlers running at once in this process. */
  concurrency: number;
  /** Extra attempts after the first (okengine's `retries`). */
  retries: number;
  /** Jobs carry a key and must run FIFO per key. */
  keyed: boolean;
  /** Called when a handler starts; a throw fails the attempt. */
  handler(call: HandlerCall): Promise<void> | void;
  /** S7: visibility timeout / lease in ms (each adapter maps it to its own setting). */
  leaseMs?: number;
  /** S6: some handlers throw, so failures must be settled per job. */
  expectFailures?: boolean;
}

/** An opened system: a producer and (after start) workers, on one namespace. */
export interface QueueHarness {
  /** Enqueues one job; resolves when committed. */
  add(job: JobSpec): Promise<void>;
  /** Enqueues a batch (the scenarios pass batches of 1 000). */
  addBulk(jobs: JobSpec[]): Promise<void>;
  /** Fastest way to load a backlog before workers start (untimed); default addBulk. */
  preload?(jobs: JobSpec[]): Promise<void>;
  /** Starts the workers. */
  start(): Promise<void>;
  /** How many jobs are dead-lettered (permanently failed) now. */
  deadCount(): Promise<number>;
  /** Jobs not yet durably settled (waiting, running, or run but not yet marked done). */
  remaining(): Promise<number>;
  close(): Promise<void>;
}

/** A fresh, isolated place for one scenario run: a schema, a temp dir, a Redis key prefix. */
export interface Namespace {
  name: string;
}

export interface QueueSystem {
  /** Stable id used in results: "okengine-postgres", "graphile-worker" … */
  id: string;
  label: string;
  backend: "memory" | "file" | "postgres" | "redis";
  /** Scenarios this system cannot run, with the reason shown in the report. */
  unsupported: Partial<Record<ScenarioId, string>>;
  /** When set, the system appears only in these scenarios (variants such as "store bulk"). */
  only?: ScenarioId[];
  /** How it is configured, for the report (one line each). */
  describe(): string[];
  /** Creates (and cleans) a namespace. */
  fresh(): Promise<Namespace>;
  open(ns: Namespace, options: QueueOptions): Promise<QueueHarness>;
  /** Drops the namespace. */
  drop(ns: Namespace): Promise<void>;
  /** S7: the lease / visibility timeout this system is given, for the report. */
  crashNote?: string;
}

/** S9: durable 3-step workflows and a durable sleep. */
export interface WorkflowHarness {
  /** Runs one 3-step workflow to completion in this process. */
  runThreeSteps(i: number): Promise<void>;
  /** Starts a workflow that sleeps `ms` durably; resolves with the wake delay (ms past the due time) once it resumed. */
  sleepOnce(i: number, ms: number): Promise<number>;
  close(): Promise<void>;
}

export interface WorkflowSystem {
  id: string;
  label: string;
  describe(): string[];
  open(): Promise<WorkflowHarness>;
}

/** One figure of one system in one scenario. */
export interface Figure {
  scenario: ScenarioId;
  /** Row id within the scenario, e.g. "drain c32", "p50". */
  metric: string;
  unit: string;
  better: "higher" | "lower";
  system: string;
  /** Median of the repeats; null when not applicable / not measured. */
  value: number | null;
  /** Every repeat's value. */
  samples: number[];
  /** Free text: caps hit, correctness, n/a reasons. */
  note?: string;
  /** Correctness checks (S5 order, S6 DLQ, S7 duplicates …). */
  checks?: Record<string, number | string | boolean>;
}

export interface Sizes {
  s1: number;
  s2: number;
  s3: number;
  s4: number;
  s5Keys: number;
  s5PerKey: number;
  /**
   * S5 drains per measurement, pooled into one rate (all jobs ÷ all drain time): a drain of 50 000 lasts
   * 2–10 s, and graphile-worker's local queue idles up to its 2 s pollInterval whenever a fetch of named
   * queues comes back short, so one drain's rate depends on how many such stalls it caught.
   */
  s5Drains: number;
  s6: number;
  s6Retries: number;
  s7Jobs: number;
  /** Seconds S7 waits after the kill for every in-flight job to run again. */
  s7WaitSeconds: number;
  s9: number;
  s9Sleeps: number;
  /** S14: broadcast events emitted one at a time. */
  s14Events: number;
  /** S15: open SSE streams on one instance, and emits timed through them. */
  s15Streams: number;
  s15Emits: number;
  /** S16: seconds of `every("1s")` clocks, how many, on how many instances. */
  s16Seconds: number;
  s16Clocks: number;
  s16Instances: number;
  /**
   * S16: rounds of okengine's clocks (fresh schema and processes each); a figure is the median of the
   * rounds'. One instance fires all of a second's slots in one statement, so a round's p99 is its worst
   * second or two: one 60 s round swung 25–57 ms between full runs.
   */
  s16Rounds: number;
  /** S16 beside graphile-worker's crontab: whole minutes (0 = not run). */
  s16CronMinutes: number;
  /** S13: parked runs seeded, and how many of them are due at boot. */
  s13Runs: number;
  s13Due: number;
  /** Seconds after which a throughput scenario stops and reports the rate so far. */
  capSeconds: number;
  /** Seconds a latency scenario may take per system. */
  latencyCapSeconds: number;
  /** Repeats of each measurement (median reported). */
  repeats: number;
}
