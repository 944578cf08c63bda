/** A PostgreSQL app process whose host clock reads OKE_CLOCK_OFFSET_MS off, or steps OKE_CLOCK_STEP_MS after boot. */
import pg from "pg";
import { pino } from "pino";
import { createApp, flow, on, signal } from "../../src/index.ts";
import { createPostgresStore } from "../../src/store/postgres/postgres-store.ts";

// A host whose clock is off: every Date.now() of this process (the system clock) reads shifted, from
// the start (OKE_CLOCK_OFFSET_MS), or from right after boot (OKE_CLOCK_STEP_MS: an NTP step after the
// app measured the database's clock, which it re-measures only a minute later).
let offset = Number(process.env.OKE_CLOCK_OFFSET_MS ?? 0);
const step = Number(process.env.OKE_CLOCK_STEP_MS ?? 0);
if (offset !== 0 || step !== 0) {
  const real = Date.now.bind(Date);
  Date.now = () => real() + offset;
}

const say = (event: Record<string, unknown>): void => {
  process.stdout.write(JSON.stringify({ pid: process.pid, ...event }) + "\n");
};

const url = process.env.OKE_TEST_DB ?? "";
const schema = process.env.OKE_SCHEMA ?? "okengine";
const holdMs = Number(process.env.OKE_HOLD_MS ?? 1_500);
// A small pool (the default is 10): the test runs two scenarios of two such processes at once.
const store = createPostgresStore({ connectionString: url, schema, pollIntervalMs: 200, poolSize: 4 });
const db = new pg.Pool({ connectionString: url, max: 4 });

const work = signal.once("skew.work", { retries: 5 });

// Each invocation is a row stamped with the database's clock at start and end: overlaps are duplicates.
const handler = on(
  work,
  flow("skew.work", {
    do: async ({ n, k }: { n: number; k: string | null }) => {
      const { rows } = await db.query<{ id: string }>(
        `INSERT INTO "${schema}".invocations (n, k, pid, started) VALUES ($1, $2, $3, clock_timestamp()) RETURNING id`,
        [n, k, process.pid],
      );
      await new Promise((r) => setTimeout(r, holdMs));
      await db.query(`UPDATE "${schema}".invocations SET finished = clock_timestamp() WHERE id = $1`, [
        rows[0]!.id,
      ]);
    },
  }),
);

// step → 10 s sleep → step; each step stamps the database's clock.
const nap = flow("skew.nap", {
  durable: true,
  do: async ({ id }: { id: string }, fx) => {
    await fx.step("before", () =>
      db.query(`INSERT INTO "${schema}".naps (id, pid, slept) VALUES ($1, $2, clock_timestamp())`, [
        id,
        process.pid,
      ]),
    );
    await fx.clock.sleep("nap", "10s");
    await fx.step("after", () =>
      db.query(`UPDATE "${schema}".naps SET woke = clock_timestamp(), woke_pid = $2 WHERE id = $1`, [
        id,
        process.pid,
      ]),
    );
  },
});

const lease = Number(process.env.OKE_LEASE_MS ?? 3_000);
const app = createApp({
  modules: [{ handler, nap }],
  env: "prod",
  store,
  logger: pino({ level: "silent" }),
  config: {
    database: { url },
    signals: { leaseMs: lease, concurrency: 8 },
    durable: { leaseMs: lease },
  },
});

await app.boot();
offset += step;
// Before "ready": a parent that signals on "ready" must find the handler (child-app.ts says why).
process.on("SIGTERM", () => {
  void app.stop({ timeoutMs: 2_000 }).then(async () => {
    await store.close();
    await db.end();
    process.exit(0);
  });
});
say({ event: "ready" });

const emits = Number(process.env.OKE_EMIT ?? 0);
const base = Number(process.env.OKE_EMIT_BASE ?? 0);
for (let i = 0; i < emits; i++) {
  const n = base + i;
  const k = n % 2 === 0 ? `k${n % 6}` : null;
  await app.emit(work, { n, k }, k === null ? {} : { key: k });
}
const runs = Number(process.env.OKE_RUNS ?? 0);
for (let i = 0; i < runs; i++) void app.invoke(nap, { id: `${process.pid}-${i}` });
say({ event: "emitted", emits, runs });
