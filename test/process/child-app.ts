// A real app process for crash and multi-instance tests, driven by OKE_SCENARIO.
/**
 * A real app process for crash and multi-instance tests. The scenario comes
 * from OKE_SCENARIO; the store is PostgreSQL (DATABASE_URL + OKE_SCHEMA) or the
 * file driver (OKE_FILE_DIR). It prints one JSON line per event on stdout.
 */
import pg from "pg";
import { pino } from "pino";
import {
  clock,
  createApp,
  every,
  flow,
  on,
  signal,
  type ClockInput,
  type Duration,
  type Fx,
} from "../../src/index.ts";
import { createFileStore } from "../../src/store/file/file-store.ts";
import { createPostgresStore } from "../../src/store/postgres/postgres-store.ts";
import { chaosKey, napMs, seededRandom } from "./chaos-keys.ts";

const say = (event: Record<string, unknown>): void => {
  process.stdout.write(JSON.stringify({ pid: process.pid, ...event }) + "\n");
};

const scenario = process.env.OKE_SCENARIO ?? "";
const url = process.env.DATABASE_URL ?? "";
const schema = process.env.OKE_SCHEMA ?? "okengine";
const store = process.env.OKE_FILE_DIR
  ? createFileStore({ dir: process.env.OKE_FILE_DIR })
  : createPostgresStore({ connectionString: url, schema, pollIntervalMs: 500 });
const results = url ? new pg.Pool({ connectionString: url, max: 4 }) : undefined;
// An idle connection of the test's own pool cut by a PostgreSQL restart must not crash the process.
results?.on("error", () => undefined);

const jobs = signal.once("jobs.work", { retries: 3 });
const blocker = new Promise<never>(() => undefined);

const modules: Record<string, unknown>[] = [];

if (scenario === "share") {
  // Three of these share 10 000 messages: each completion is recorded with a serial id, in commit order.
  modules.push({
    w: on(
      jobs,
      flow("jobs.work", {
        do: async ({ n, k }: { n: number; k: string }) => {
          await results!.query(`INSERT INTO "${schema}".results (n, k, pid) VALUES ($1, $2, $3)`, [
            n,
            k,
            process.pid,
          ]);
        },
      }),
    ),
  });
}

if (scenario === "chaos") {
  // The chaos consumer: each handler run is recorded with its attempt, after OKE_HANDLER_MS of work.
  const workMs = Number(process.env.OKE_HANDLER_MS ?? 0);
  modules.push({
    w: on(
      jobs,
      flow("jobs.work", {
        do: async ({ n, k }: { n: number; k: string }, fx) => {
          if (workMs > 0) await new Promise((r) => setTimeout(r, workMs));
          await results!.query(
            `INSERT INTO "${schema}".results (n, k, pid, attempt) VALUES ($1, $2, $3, $4)`,
            [n, k, process.pid, fx.attempt],
          );
        },
      }),
    ),
  });
}

if (scenario === "hang-then-work") {
  // The first process to claim "stuck" hangs forever (it will be SIGKILLed); later attempts finish.
  modules.push({
    w: on(
      jobs,
      flow("jobs.work", {
        do: async ({ n }: { n: number }, fx) => {
          say({ event: "start", n, attempt: fx.attempt });
          if (process.env.OKE_HANG === "1") await blocker;
          say({ event: "done", n, attempt: fx.attempt });
        },
      }),
    ),
  });
}

if (scenario === "suicide") {
  // Message n = 1 is poison: its handler records the invocation, then SIGKILLs its own process.
  modules.push({
    w: on(
      jobs,
      flow("jobs.work", {
        do: async ({ n, k }: { n: number; k: string }, fx) => {
          await results!.query(`INSERT INTO "${schema}".results (n, k, pid) VALUES ($1, $2, $3)`, [
            n,
            k,
            process.pid,
          ]);
          say({ event: "start", n, attempt: fx.attempt });
          if (n === 1) process.kill(process.pid, "SIGKILL");
          say({ event: "done", n, attempt: fx.attempt });
        },
      }),
    ),
  });
}

if (scenario === "durable") {
  // step 1 runs, then step 2 hangs in the first process; a second process must resume without re-running step 1.
  const provision = flow("provision", {
    durable: true,
    do: async ({ id }: { id: string }, fx) => {
      await fx.step("step-1", () => {
        say({ event: "step-1", id });
        return { id };
      });
      await fx.step("step-2", async () => {
        say({ event: "step-2", id });
        if (process.env.OKE_HANG === "1") await blocker;
      });
      if (process.env.OKE_SLEEP) await fx.clock.sleep("pause", process.env.OKE_SLEEP as Duration);
      await fx.step("step-3", () => say({ event: "step-3", id }));
      say({ event: "completed", id, runId: fx.runId });
    },
  });
  modules.push({ provision });
}

if (scenario === "durable-chaos") {
  // The durable chaos flow: step a → sleep → step b. Each step body counts itself in effects (run, step)
  // and logs a 'ran' event; once fx.step has returned (journaled) the flow logs 'journaled'. Database
  // writes retry through an outage; step bodies take OKE_STEP_MS..2×OKE_STEP_MS so kills land inside them.
  const seed = Number(process.env.OKE_SEED ?? 1);
  const stepMs = Number(process.env.OKE_STEP_MS ?? 200);
  const persist = async (sql: string, values: unknown[]): Promise<void> => {
    for (;;) {
      try {
        await results!.query(sql, values);
        return;
      } catch {
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  };
  // `at`: when it happened (for 'ran', when the body started), not when the row landed — an insert
  // retried through the PostgreSQL restart can land after a takeover's rows.
  const log = (run: string, step: string, kind: string) =>
    persist(`INSERT INTO "${schema}".events (run, step, kind, pid, at) VALUES ($1, $2, $3, $4, $5)`, [
      run,
      step,
      kind,
      process.pid,
      Date.now(),
    ]);
  const body = (run: string, id: string, step: string, i: number) => async (): Promise<string> => {
    say({ event: "step-start", id, step });
    const started = Date.now();
    // One statement, so the counter and the log can never disagree (a kill lands before or after both).
    await persist(
      `WITH counted AS (
         INSERT INTO "${schema}".effects (run, step, count) VALUES ($1, $2, 1)
         ON CONFLICT (run, step) DO UPDATE SET count = effects.count + 1 RETURNING run
       )
       INSERT INTO "${schema}".events (run, step, kind, pid, at) SELECT run, $2, 'ran', $3, $4 FROM counted`,
      [run, step, process.pid, started],
    );
    await new Promise((r) =>
      setTimeout(r, stepMs + Math.floor(seededRandom(seed + i * 31 + step.length)() * stepMs)),
    );
    say({ event: "step-end", id, step });
    return `${step} of ${id}`;
  };
  const run = async ({ id, i }: { id: string; i: number }, fx: Fx): Promise<void> => {
    await fx.step("a", body(fx.runId, id, "a", i));
    await log(fx.runId, "a", "journaled");
    await fx.clock.sleep("nap", `${napMs(i, seed)}ms` as Duration);
    await fx.step("b", body(fx.runId, id, "b", i));
    await log(fx.runId, "b", "journaled");
  };
  const chaosRun = flow("chaos.run", { durable: true, do: run });
  // The same flow as a durable once consumer: its run id is the message id, its message settles with it.
  const consume = on(
    signal.once("chaos.runs", { retries: 3 }),
    flow("chaos.consume", { durable: true, do: run }),
  );
  modules.push({ chaosRun, consume });
}

// A host whose clock is off: every Date.now() of this process (the system clock) reads shifted.
if (process.env.OKE_CLOCK_OFFSET_MS) {
  const real = Date.now.bind(Date);
  const offset = Number(process.env.OKE_CLOCK_OFFSET_MS);
  Date.now = () => real() + offset;
}

if (scenario === "clock") {
  // Every handler run of a clock fire is recorded: (clock, slot, attempt, pid).
  const record = async (input: ClockInput, attempt: number): Promise<void> => {
    await results!.query(
      `INSERT INTO "${schema}".clock_runs (clock, slot, attempt, pid) VALUES ($1, $2, $3, $4)`,
      [input.clock, input.scheduledAt, attempt, process.pid],
    );
  };
  modules.push({
    second: on(every("1s"), flow("ticks.second", { do: (input, fx) => record(input, fx.attempt) })),
    minute: on(
      clock("ticks.minute", { cron: "* * * * *" }),
      flow("ticks.minute", { do: (input, fx) => record(input, fx.attempt) }),
    ),
  });
}

const app = createApp({
  modules,
  env: "prod",
  store,
  logger: pino({ level: "silent" }),
  config: {
    database: { url: url || "postgres://unused" },
    signals: {
      leaseMs: Number(process.env.OKE_LEASE_MS ?? 30_000),
      concurrency: Number(process.env.OKE_CONCURRENCY ?? 16),
    },
    durable: { leaseMs: Number(process.env.OKE_LEASE_MS ?? 30_000) },
  },
});

await app.boot();
// Before "ready": a parent that signals on "ready" must find the handler, even when this process is
// descheduled between the two lines (it was, on a loaded machine: killed by the default action).
const shutdown = (): void => {
  void app.stop({ timeoutMs: 2_000 }).then(async () => {
    await store.close();
    await results?.end();
    say({ event: "stopped" });
    process.exit(0);
  });
};
process.on("SIGTERM", shutdown);
process.on("SIGINT", shutdown);
say({ event: "ready" });

if (process.env.OKE_INVOKE) {
  void app
    .invoke("provision", { id: process.env.OKE_INVOKE })
    .then((v) => say({ event: "invoked", value: v ?? null }));
}

if (scenario === "durable-chaos" && process.env.OKE_START_IDS) {
  // Starts the listed runs (r<i>), one every OKE_START_EVERY_MS, without waiting for them.
  const every = Number(process.env.OKE_START_EVERY_MS ?? 0);
  void (async () => {
    // A start refused by an outage (PostgreSQL restarting) is started again once it is certain the
    // store has no run of that id: a refused start that was stored anyway (its reply lost) is left to
    // the instances that take it over, so there is never a second run of one id.
    const stored = async (id: string): Promise<boolean> => {
      for (;;)
        try {
          const { rowCount } = await results!.query(
            `SELECT 1 FROM "${schema}".runs WHERE flow = 'chaos.run' AND input->>'id' = $1`,
            [id],
          );
          return rowCount !== null && rowCount > 0;
        } catch {
          await new Promise((r) => setTimeout(r, 200));
        }
    };
    const start = (id: string, i: number): void => {
      app.invoke("chaos.run", { id, i }).catch(async (e: unknown) => {
        say({ event: "invoke-failed", id, error: e instanceof Error ? e.message : String(e) });
        // Not a refusal: the run exists and another instance holds it (JournalLeaseBusy, a late start).
        await new Promise((r) => setTimeout(r, 1_000));
        if (!(await stored(id))) start(id, i);
      });
    };
    for (const id of process.env.OKE_START_IDS!.split(",")) {
      start(id, Number(id.slice(1)));
      if (every > 0) await new Promise((r) => setTimeout(r, every));
    }
    say({ event: "all-started" });
  })();
}

if (scenario === "emit") {
  // The chaos emitter: emits n = OKE_EMIT_FROM, +OKE_EMIT_STEP, … below OKE_EMIT_TO one at a time, every
  // OKE_EMIT_PACE_MS, and prints {event:"acked", n} once an emit resolved (stdout on a pipe is synchronous,
  // so a printed ack survives a SIGKILL). Each emit carries the id chaos-<n>: a refused emit (the database
  // restarting) is retried, and a successor re-emits the one a SIGKILL cut short, without enqueuing twice.
  const out = signal.once("jobs.work", { retries: 3, optional: true });
  const from = Number(process.env.OKE_EMIT_FROM);
  const step = Number(process.env.OKE_EMIT_STEP ?? 1);
  const to = Number(process.env.OKE_EMIT_TO);
  const pace = Number(process.env.OKE_EMIT_PACE_MS ?? 0);
  const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
  void (async () => {
    for (let n = from; n < to; n += step) {
      const key = chaosKey(n, step);
      for (let refused = 0; ; refused++) {
        try {
          await app.emit(
            out,
            { n, k: key ?? "none" },
            { id: `chaos-${n}`, ...(key === null ? {} : { key }) },
          );
          say({ event: "acked", n, refused });
          break;
        } catch {
          await pause(100);
        }
      }
      if (pace > 0) await pause(pace);
    }
    say({ event: "emitted" });
  })();
}
