// Schedules across real processes on postgres: every slot fired once through kills, restarts and a fast clock.
import { describe, expect, it } from "vitest";
import { useFleet } from "./fleet.ts";
import type { Child } from "./spawn.ts";

/** Seconds the fleet runs: ~25 s by default, OKE_CLOCK_SOAK=1 for the 2-minute run. */
const RUN_S = process.env.OKE_CLOCK_SOAK === "1" ? 120 : 25;

const fleet = useFleet({
  schema: `oke_clock_${process.pid}`,
  env: { OKE_SCENARIO: "clock", OKE_LEASE_MS: "2000" },
  tables: [
    `CREATE TABLE $S.clock_runs (clock text NOT NULL, slot bigint NOT NULL, attempt int NOT NULL, pid int NOT NULL)`,
  ],
});
const { schema, children } = fleet;
const spawnChild = (env: Record<string, string> = {}): Child => fleet.spawn(env);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface FireRow {
  clock: string;
  slot: number;
  fired_at: number;
  missed_runs: number;
}

describe.sequential("clock on 3 PostgreSQL processes", () => {
  it(
    `every slot fires exactly once while one instance is SIGKILLed and restarted and one runs 40 s fast (${RUN_S} s)`,
    async () => {
      const a = spawnChild();
      const fast = spawnChild({ OKE_CLOCK_OFFSET_MS: "40000" });
      let victim = spawnChild();
      await Promise.all([a, fast, victim].map((c) => c.waitFor((e) => e.event === "ready", "ready")));
      const kills = Math.max(1, Math.floor(RUN_S / 20));
      const slice = (RUN_S * 1000) / (kills * 2);
      for (let k = 0; k < kills; k++) {
        await sleep(slice);
        await victim.kill("SIGKILL");
        await sleep(1_500);
        victim = spawnChild();
        await victim.waitFor((e) => e.event === "ready", "restarted");
        await sleep(slice - 1_500);
      }
      // Every recorded fire ran its flow (a fire the killed process held is redelivered after its lease).
      const deadline = Date.now() + 60_000;
      for (;;) {
        const { rows } = await fleet.query<{ unrun: string }>(
          `SELECT count(*)::text AS unrun FROM "${schema}".schedule_fires f
         WHERE NOT EXISTS (SELECT 1 FROM "${schema}".clock_runs r WHERE r.clock = f.clock AND r.slot = f.slot)`,
        );
        if (rows[0]!.unrun === "0") break;
        if (Date.now() > deadline) throw new Error(`${rows[0]!.unrun} fires never ran`);
        await sleep(250);
      }
      await Promise.all(children.filter((c) => c.proc.exitCode === null).map((c) => c.kill("SIGTERM")));

      const fires = (
        await fleet.query<FireRow>(
          `SELECT clock, slot::float8 AS slot, fired_at::float8 AS fired_at, missed_runs FROM "${schema}".schedule_fires ORDER BY clock, slot`,
        )
      ).rows;
      const seconds = fires.filter((f) => f.clock === "ticks.second");
      expect(seconds.length).toBeGreaterThan(RUN_S / 2);
      // Consecutive fires are whole seconds apart and account for every slot between them: a fire's
      // missedRuns are the slots it skipped (catch-up one, when no instance got to a slot in time).
      let missed = 0;
      for (let i = 1; i < seconds.length; i++) {
        expect(seconds[i]!.slot % 1000).toBe(0);
        expect(seconds[i]!.slot - seconds[i - 1]!.slot).toBe((seconds[i]!.missed_runs + 1) * 1000);
        missed += seconds[i]!.missed_runs;
      }
      // Fleet time: the fast host never fired a slot early.
      for (const f of fires) expect(f.fired_at, `${f.clock} ${f.slot}`).toBeGreaterThanOrEqual(f.slot);
      const minutes = fires.filter((f) => f.clock === "ticks.minute");
      for (const f of minutes) expect(f.slot % 60_000).toBe(0);

      // Each fire's flow ran (a row per fire, above), its first attempt at most once; a rerun only ever follows a lease
      // lost to a kill. A first attempt may never run: a claim that waited in a pool's buffer past
      // half its (2 s) lease is given back unstarted, and the fast host, whose clock reads every
      // lease 40 s early, may have taken the fire as attempt 2 meanwhile.
      const runs = (
        await fleet.query<{ clock: string; slot: number; firsts: number; runs: number }>(
          `SELECT clock, slot::float8 AS slot, count(*) FILTER (WHERE attempt = 1)::int AS firsts, count(*)::int AS runs
         FROM "${schema}".clock_runs GROUP BY clock, slot`,
        )
      ).rows;
      expect(runs).toHaveLength(fires.length);
      for (const r of runs) expect(r.firsts, `${r.clock} ${r.slot}`).toBeLessThanOrEqual(1);
      const pids = new Set(
        (await fleet.query<{ pid: number }>(`SELECT DISTINCT pid FROM "${schema}".clock_runs`)).rows.map(
          (r) => r.pid,
        ),
      );
      console.log(
        `clock processes: ${seconds.length} one-second slots and ${minutes.length} minute slots fired once each, ${missed} skipped by catch-up, ${runs.filter((r) => r.runs > 1).length} re-run after a kill; handlers ran on ${pids.size} processes`,
      );
    },
    (RUN_S + 120) * 1000,
  );
});
