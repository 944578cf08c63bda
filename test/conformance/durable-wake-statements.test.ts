// PostgreSQL statements on the wake of one sleeping run: the claim returns the run's journal, no second read.
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { createApp } from "../../src/app/app.ts";
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
  if (/^WITH due AS/.test(text)) return "claim";
  if (/^SELECT \* FROM \S+\.journal_entries/.test(text)) return "journal read";
  if (/^SELECT (min\()?LEAST/.test(text)) return "nextWakeAt";
  if (/^UPDATE \S+\.runs SET status = \$4/.test(text)) return "finish";
  if (/^INSERT INTO \S+\.journal_entries/.test(text)) return "append";
  return "other";
}

describe("postgres: the wake of one sleeping run", () => {
  it("claims the run and reads its journal in one statement, then resumes and finishes it", async () => {
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
    const store = createPostgresStore({ connectionString: TEST_DATABASE_URL, pool, schema, pollIntervalMs: 3_600_000 });
    cleanups.push(async () => {
      await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await pool.end();
    });
    const woke = signal.once("naps.go", { optional: true });
    const ran: string[] = [];
    const nap = on(
      woke,
      flow("naps.nap", {
        durable: true,
        do: async (_: unknown, fx) => {
          await fx.step("before", () => ran.push("before"));
          await fx.clock.sleep("nap", "1h");
          ran.push("after");
        },
      }),
    );
    const time = createTimeTravel(T0);
    const app = createApp({ modules: [{ nap }], env: "test", clock: time, store });
    cleanups.push(() => app.stop({ timeoutMs: 2_000 }));
    await app.boot();
    await app.emit(woke, {});
    // Reads of this test go through a client of their own, outside the counted pool.
    const reader = new pg.Client({ connectionString: TEST_DATABASE_URL });
    await reader.connect();
    cleanups.push(() => reader.end());
    const statusOf = async (): Promise<string[]> =>
      (await reader.query<{ status: string }>(`SELECT status FROM "${schema}".runs`)).rows.map((r) => r.status);
    await until(async () => (await statusOf()).join() === "sleeping", "parked");
    await app.idle();
    counting = true;
    time.advance("1h");
    await until(async () => (await statusOf()).join() === "completed", "resumed");
    counting = false;
    expect(ran).toEqual(["before", "after"]);
    // The wake: one claim (the run and its journal), then the re-arm (nextWakeAt) and the finish, which
    // run side by side. Before the claim returned the journal, a journal read came between: 4 statements.
    const end = Math.max(seen.indexOf("finish"), seen.indexOf("nextWakeAt"));
    const wake = seen.slice(seen.indexOf("claim"), end + 1).filter((k) => k !== "other");
    expect(wake[0]).toBe("claim");
    expect([...wake].sort()).toEqual(["claim", "finish", "nextWakeAt"]);
  });
});
