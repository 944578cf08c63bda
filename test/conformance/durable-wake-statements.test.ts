// PostgreSQL statements on the wake of one sleeping run: the claim returns the run's journal, no second read.
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { createApp } from "../../src/app/app.ts";
import { type Duration, parseDuration } from "../../src/clock/duration.ts";
import { createTimeTravel } from "../../src/clock/time-travel.ts";
import { flow, on, signal } from "../../src/index.ts";
import { createPostgresStore } from "../../src/store/postgres/postgres-store.ts";
import { until } from "./app-fixture.ts";
import { TEST_DATABASE_URL } from "./drivers.ts";

const T0 = 1_000_000;
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()!();
});

/** The durable path's statement kinds; everything else (heartbeats, retention, message polls) is "other". */
function kindOf(text: string): string {
  if (/^WITH due AS .* WHERE id = ANY\(\$5::text\[\]\)/.test(text)) return "claim by id";
  if (/^WITH due AS/.test(text)) return "claim";
  if (/^SELECT \* FROM \S+\.journal_entries/.test(text)) return "journal read";
  if (/^SELECT (min\()?LEAST/.test(text)) return "nextWakeAt";
  if (/^SELECT \S+\.run_finish\(/.test(text)) return "finish";
  if (/^SELECT \S+\.journal_append\(/.test(text)) return "append";
  return "other";
}

/**
 * Parks one durable consumer run (a step, then a sleep of `nap`), then counts the statements of its
 * wake. With `ahead` (ms), time first stops that long before the wake: `ahead` holds the statements
 * sent then (the claim ahead of the wake time), `wake` those from the wake time on.
 */
async function wakeStatements(
  nap: Duration,
  advance: Duration,
  ahead = 0,
): Promise<{ ran: string[]; park: string[]; ahead: string[]; wake: string[] }> {
  const schema = `wake_t_stmts_${process.pid}_${Date.now()}`;
  const pool = new pg.Pool({ connectionString: TEST_DATABASE_URL, max: 4 });
  const seen: string[] = [];
  let counting = false;
  // Every statement any pooled client sends (pool.query goes through a client too); LISTEN is not pooled.
  pool.on("connect", (client) => {
    const query = client.query.bind(client) as (...a: unknown[]) => unknown;
    (client as { query: unknown }).query = (...args: unknown[]): unknown => {
      const first = args[0];
      const text = typeof first === "string" ? first : ((first as { text?: string } | undefined)?.text ?? "");
      if (counting) seen.push(kindOf(text.replace(/\s+/g, " ").trim()));
      return query(...args);
    };
  });
  const store = createPostgresStore({
    connectionString: TEST_DATABASE_URL,
    pool,
    schema,
    pollIntervalMs: 3_600_000,
  });
  cleanups.push(async () => {
    await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await pool.end();
  });
  const woke = signal.once("naps.go", { optional: true });
  const ran: string[] = [];
  const napper = on(
    woke,
    flow("naps.nap", {
      durable: true,
      do: async (_: unknown, fx) => {
        await fx.step("before", () => ran.push("before"));
        await fx.clock.sleep("nap", nap);
        ran.push("after");
      },
    }),
  );
  const time = createTimeTravel(T0);
  const app = createApp({ modules: [{ napper }], env: "test", clock: time, store });
  cleanups.push(() => app.stop({ timeoutMs: 2_000 }));
  await app.boot();
  // The boot's own claim round is done before anything is counted.
  await app.idle();
  counting = true;
  await app.emit(woke, {});
  // Reads of this test go through a client of their own, outside the counted pool.
  const reader = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await reader.connect();
  cleanups.push(() => reader.end());
  const statusOf = async (): Promise<string[]> =>
    (await reader.query<{ status: string }>(`SELECT status FROM "${schema}".runs`)).rows.map((r) => r.status);
  await until(async () => (await statusOf()).join() === "sleeping", "parked");
  await app.idle();
  const parked = seen.length;
  let claimedAhead = parked;
  if (ahead > 0) {
    time.advance(parseDuration(advance) - ahead);
    // Reserved: the lease is taken, the run still reads sleeping until its wake time.
    const reserved = async (): Promise<boolean> =>
      (
        await reader.query<{ n: string }>(
          `SELECT count(*) AS n FROM "${schema}".runs WHERE status = 'sleeping' AND lease_owner IS NOT NULL`,
        )
      ).rows[0]?.n === "1";
    await until(reserved, "reserved ahead");
    await app.idle();
    claimedAhead = seen.length;
    time.advance(ahead);
  } else time.advance(advance);
  await until(async () => (await statusOf()).join() === "completed", "resumed");
  // The app is idle once the resume ended and any claim round it started is done.
  await app.idle();
  counting = false;
  const early = seen.slice(parked, claimedAhead);
  const wake = seen.slice(claimedAhead);
  const claim = ahead > 0 ? 0 : wake.findIndex((k) => k.startsWith("claim"));
  return {
    ran,
    park: seen.slice(0, parked).filter((k) => k !== "other"),
    ahead: early.slice(early.findIndex((k) => k.startsWith("claim"))).filter((k) => k !== "other"),
    wake: wake.slice(claim).filter((k) => k !== "other"),
  };
}

describe("postgres: the wake of one sleeping run", () => {
  it("claims the run and reads its journal in one statement, then resumes and finishes it", async () => {
    // A 1 h sleep is past the scheduler's hold horizon: the wake is the store-wide claim.
    const { ran, wake } = await wakeStatements("1h", "1h");
    expect(ran).toEqual(["before", "after"]);
    // The wake: one claim (the run and its journal), then the re-arm (nextWakeAt) and the finish, which
    // run side by side. Before the claim returned the journal, a journal read came between: 4 statements;
    // and the resume's end claimed and re-armed again (its freed permit poked the scheduler): 2 more.
    expect(wake[0]).toBe("claim");
    expect([...wake].sort()).toEqual(["claim", "finish", "nextWakeAt"]);
  });

  it("the instance that parked a run claims it by id when due: no scan of the due runs", async () => {
    const { ran, park, wake } = await wakeStatements("30s", "30s");
    expect(ran).toEqual(["before", "after"]);
    // The park's own wake event re-reads the next deadline; it does not scan for due runs (nothing is
    // due: the park moved a deadline into the future).
    expect(park.filter((k) => k.startsWith("claim"))).toEqual([]);
    expect(park.filter((k) => k === "nextWakeAt")).toHaveLength(1);
    // Nothing after the finish: no scan of the due runs when the resume's permit comes back.
    expect(wake[0]).toBe("claim by id");
    expect([...wake].sort()).toEqual(["claim by id", "finish", "nextWakeAt"]);
  });

  it("a run its instance reserved ahead of its wake time: from the wake time on, its resume's claim then the finish", async () => {
    // 10 ms before the wake time, inside the postgres driver's 50 ms lookahead.
    const { ran, ahead, wake } = await wakeStatements("30s", "30s", 10);
    expect(ran).toEqual(["before", "after"]);
    expect(ahead[0]).toBe("claim by id");
    expect([...ahead].sort()).toEqual(["claim by id", "nextWakeAt"]);
    // The resume's claim (sleeping → running, under the reserved lease) is sent at the wake time and
    // not awaited before the replay; the finish waits for it, so it comes after.
    expect(wake).toEqual(["claim by id", "finish"]);
  });
});
