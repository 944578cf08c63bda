// Durable chaos on a private PostgreSQL cluster: 200 runs (step → sleep → step) through seeded SIGKILLs and a restart.
/**
 * Three starter processes start 200 runs of chaos.run (step a, fx.clock.sleep of 1–7 s, step b) over
 * a few seconds, beside a fourth instance. At seeded moments a random ready instance is SIGKILLed
 * (inside steps, while runs are parked, while they wake) and replaced; PostgreSQL restarts once.
 * Every step body counts itself in effects (run, step) and logs 'ran'; the flow logs 'journaled' once
 * fx.step returned. 40 more runs of the same flow come from a durable once consumer (messages
 * enqueued first; run id = message id). Asserts: every chaos.run run completed, one run per id;
 * each step of a completed run ran at least once; a step ran again only after a killed process ran
 * it (never after it was journaled); every consumer message delivered with its completed run, or —
 * its 4 attempts spent by deaths and 2 s leases lapsed under load — dead with a failure saying so
 * (LEASE_EXPIRED "… ran past the lease (slow or hung), crashed, or lost its process" / "never started", or OKE1303), its run
 * failed with the same failure or never started. Nothing else may fail.
 * OKE_CHAOS_SEED=<n> replays the schedule; OKE_CHAOS_FULL=1: 40 kills instead of 20.
 */
import { describe, expect, it } from "vitest";
import { seededRandom } from "./chaos-keys.ts";
import { useFleet } from "./fleet.ts";
import { usePrivateCluster } from "./private-cluster.ts";
import type { Child } from "./spawn.ts";

const FULL = process.env.OKE_CHAOS_FULL === "1";
const SEED = Number(process.env.OKE_CHAOS_SEED ?? 20_261_202);
const RUNS = 200;
/** More runs, of the same flow as a durable once consumer (chaos.runs → chaos.consume), enqueued first. */
const CONSUMED = 40;
const STARTERS = 3;
const INSTANCES = 4;
const KILLS = FULL ? 40 : 20;
const LEASE_MS = 2_000;

const cluster = usePrivateCluster();
const fleet = useFleet({
  schema: "dchaos",
  url: () => cluster.url,
  dropSchema: false,
  env: {
    OKE_SCENARIO: "durable-chaos",
    OKE_LEASE_MS: String(LEASE_MS),
    OKE_SEED: String(SEED),
    OKE_STEP_MS: "150",
  },
  tables: [
    `CREATE TABLE $S.effects (run text NOT NULL, step text NOT NULL, count int NOT NULL, PRIMARY KEY (run, step))`,
    `CREATE TABLE $S.events (id bigserial PRIMARY KEY, run text NOT NULL, step text NOT NULL, kind text NOT NULL, pid int NOT NULL, at bigint NOT NULL)`,
  ],
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const firstError = (stderr: string): string =>
  stderr
    .split("\n")
    .find((l) => /^\s*\w*Error\b.*:|^\s*code:/.test(l))
    ?.trim() ?? stderr.trim().slice(0, 200);

interface Proc {
  child: Child;
  ready: boolean;
  /** The ids this process was told to start. */
  ids: string[];
}

describe.sequential(`durable chaos on PostgreSQL (seed ${SEED})`, () => {
  it(
    `${RUNS} durable runs (step → sleep → step) and ${CONSUMED} more of a durable consumer on ${INSTANCES} processes, ${KILLS} SIGKILLs and a PostgreSQL restart: every run completes, no journaled step re-runs`,
    async () => {
      console.log(
        `durable chaos: seed ${SEED} (OKE_CHAOS_SEED=${SEED} replays it), ${RUNS} runs, ${KILLS} kills`,
      );
      const random = seededRandom(SEED);
      const started = Date.now();
      const spawn = (ids: string[] = []): Proc => {
        const child = fleet.spawn(
          ids.length > 0 ? { OKE_START_IDS: ids.join(","), OKE_START_EVERY_MS: "60" } : {},
        );
        const p: Proc = { child, ready: false, ids };
        child
          .waitFor((e) => e.event === "ready", "ready", 90_000)
          .then(
            () => (p.ready = true),
            () => undefined, // killed before ready: never a victim
          );
        return p;
      };
      await fleet.enqueue(
        "chaos.runs",
        Array.from({ length: CONSUMED }, (_, i) => ({ payload: { id: `m${i}`, i: RUNS + i }, key: null })),
      );
      const all = Array.from({ length: RUNS }, (_, i) => `r${i}`);
      const live: Proc[] = [];
      for (let s = 0; s < STARTERS; s++) live.push(spawn(all.filter((_, i) => i % STARTERS === s)));
      for (let s = STARTERS; s < INSTANCES; s++) live.push(spawn());

      const startedIds = async (): Promise<Set<string>> =>
        new Set(
          (
            await fleet.query<{ id: string }>(
              `SELECT input->>'id' AS id FROM dchaos.runs WHERE flow = 'chaos.run'`,
            )
          ).rows.map((r) => r.id),
        );
      // A process that died on its own (one booting while PostgreSQL restarts exits) is replaced, a
      // starter by one starting what it had not created; its step runs are not explained by a kill.
      const selfDied: string[] = [];
      // Processes SIGKILLed here, and those that died on their own: a step run again after one of
      // them ran it is explained by that death as by a kill.
      const killed = new Set<number>();
      const died = new Set<number>();
      const dead = (pid: number): boolean => killed.has(pid) || died.has(pid);
      const heal = async (): Promise<void> => {
        for (const [i, p] of live.entries())
          if (p.child.dead) {
            selfDied.push(`${p.ready ? "after" : "before"} ready: ${firstError(p.child.stderr)}`);
            died.add(p.child.proc.pid!);
            const have = p.ids.length > 0 ? await startedIds() : new Set<string>();
            live[i] = spawn(p.ids.filter((id) => !have.has(id)));
          }
      };
      let inStep = 0; // kills of a process with a step body in progress
      let afterWake = 0; // … of which one was step b: the run had woken from its nap
      let whileParked = 0; // kills while runs were sleeping
      let starterKills = 0;
      let restarted = 0; // when the PostgreSQL restart began (Date.now(), like events.at)
      const restartAt = 3 + Math.floor(random() * Math.floor(KILLS / 2));
      for (let kill = 0; kill < KILLS; kill++) {
        // Once: a kill skipped below (kill--) comes back to the same count.
        if (kill === restartAt && restarted === 0) {
          restarted = Date.now();
          await cluster.restart();
        }
        await sleep(500 + Math.floor(random() * 900));
        await heal();
        const ready = live.filter((p) => p.ready);
        if (ready.length < 2) {
          kill--; // keep one instance standing between kills
          continue;
        }
        const victim = ready[Math.floor(random() * ready.length)]!;
        live.splice(live.indexOf(victim), 1);
        const open = new Map<string, number>();
        for (const e of victim.child.events)
          if (e.event === "step-start" || e.event === "step-end") {
            const k = `${String(e.id)}/${String(e.step)}`;
            open.set(k, (open.get(k) ?? 0) + (e.event === "step-start" ? 1 : -1));
          }
        if ([...open.values()].some((v) => v > 0)) inStep++;
        if ([...open.entries()].some(([k, v]) => v > 0 && k.endsWith("/b"))) afterWake++;
        const parked = await fleet
          .query<{ c: string }>(`SELECT count(*) AS c FROM dchaos.runs WHERE status = 'sleeping'`)
          .then((r) => Number(r.rows[0]!.c));
        if (parked > 0) whileParked++;
        killed.add(victim.child.proc.pid!);
        await victim.child.kill("SIGKILL");
        // A starter cut short: its successor starts what the killed one had not created yet.
        let missing: string[] = [];
        if (victim.ids.length > 0) {
          starterKills++;
          await sleep(100);
          const have = await startedIds();
          missing = victim.ids.filter((id) => !have.has(id));
        }
        live.push(spawn(missing));
      }

      const deadline = Date.now() + (FULL ? 300_000 : 120_000);
      let status: Record<string, number> = {};
      for (;;) {
        await heal();
        const { rows } = await fleet.query<{ status: string; c: string }>(
          `SELECT status, count(*) AS c FROM dchaos.runs WHERE flow IN ('chaos.run', 'chaos.consume') GROUP BY status`,
        );
        status = Object.fromEntries(rows.map((r) => [r.status, Number(r.c)]));
        // Done when every started run ended and every message settled: a consumer message dead
        // before its run started has no run at all.
        const open = await fleet.query<{ runs: string; started: string; messages: string }>(
          `SELECT (SELECT count(*) FROM dchaos.runs WHERE flow IN ('chaos.run', 'chaos.consume') AND status NOT IN ('completed', 'failed')) AS runs,
                  (SELECT count(*) FROM dchaos.runs WHERE flow = 'chaos.run') AS started,
                  (SELECT count(*) FROM dchaos.messages WHERE signal = 'chaos.runs' AND status IN ('pending', 'inflight')) AS messages`,
        );
        const o = open.rows[0]!;
        if (Number(o.runs) === 0 && Number(o.started) >= RUNS && Number(o.messages) === 0) break;
        if (Date.now() > deadline) throw new Error(`runs not finished: ${JSON.stringify(status)}`);
        await sleep(250);
      }
      await Promise.all(live.map((p) => p.child.kill("SIGTERM")));

      const runs = (
        await fleet.query<{ id: string; run: string; status: string }>(
          `SELECT input->>'id' AS id, id AS run, status FROM dchaos.runs WHERE flow IN ('chaos.run', 'chaos.consume') AND status = 'completed'`,
        )
      ).rows;
      const events = (
        await fleet.query<{ id: string; run: string; step: string; kind: string; pid: number; at: string }>(
          `SELECT id::text, run, step, kind, pid, at::text FROM dchaos.events ORDER BY at, id`,
        )
      ).rows;
      const effects = (
        await fleet.query<{ run: string; step: string; count: number }>(
          `SELECT run, step, count FROM dchaos.effects`,
        )
      ).rows;
      const count = new Map(effects.map((e) => [`${e.run}/${e.step}`, e.count]));
      const missingSteps: string[] = [];
      const unexplained: string[] = [];
      let reRuns = 0;
      const byStep = new Map<string, typeof events>();
      for (const e of events)
        byStep.set(`${e.run}/${e.step}`, [...(byStep.get(`${e.run}/${e.step}`) ?? []), e]);
      for (const r of runs)
        for (const step of ["a", "b"]) {
          const k = `${r.run}/${step}`;
          const list = byStep.get(k) ?? [];
          const ran = list.filter((e) => e.kind === "ran");
          if ((count.get(k) ?? 0) < 1 || ran.length < 1) missingSteps.push(`${r.id} ${step}`);
          if ((count.get(k) ?? 0) !== ran.length)
            unexplained.push(`${r.id} ${step}: counter ${count.get(k)} but ${ran.length} runs logged`);
          reRuns += Math.max(0, ran.length - 1);
          // The step's events, for an unexplained re-run's message: kind, pid (killed or not), at, id.
          const trail = () =>
            list
              .map(
                (x) =>
                  `${x.kind} ${x.pid}${killed.has(x.pid) ? " killed" : died.has(x.pid) ? " died" : ""} ${x.at} #${x.id}`,
              )
              .join(", ");
          for (const [i, e] of ran.entries()) {
            if (i > 0 && !dead(ran[i - 1]!.pid))
              unexplained.push(
                `${r.id} ${step} re-ran after live pid ${ran[i - 1]!.pid} ran it; its events: ` + trail(),
              );
            // By when the body started, not when its row landed: a 'ran' insert retried through the
            // PostgreSQL restart can land after a takeover journaled the step it started before.
            const journaled = list.find((j) => j.kind === "journaled" && Number(j.at) < Number(e.at));
            if (journaled)
              unexplained.push(
                `${r.id} ${step} re-ran after it was journaled (pid ${journaled.pid}); PostgreSQL restarted at ${restarted}; its events: ` +
                  trail(),
              );
          }
        }
      const ids = new Set(runs.map((r) => r.id));
      const messages = Object.fromEntries(
        (
          await fleet.query<{ status: string; c: string }>(
            `SELECT status, count(*) AS c FROM dchaos.messages WHERE signal = 'chaos.runs' GROUP BY status`,
          )
        ).rows.map((r) => [r.status, Number(r.c)]),
      );
      console.log(
        `durable chaos: seed ${SEED}: ${runs.length} runs (${ids.size} ids; ${CONSUMED} of a durable consumer, its messages ${JSON.stringify(messages)}), ${JSON.stringify(status)}; ${killed.size} SIGKILLs ` +
          `(${inStep} inside a step, ${afterWake} of them in step b after a wake, ${whileParked} while runs were parked, ${starterKills} of starters) + 1 PostgreSQL restart (${selfDied.length} processes exited on their own and were replaced${selfDied.length > 0 ? `: ${selfDied[0]}` : ""}); ` +
          `${reRuns} step re-runs (${unexplained.length} not explained by a kill), ${missingSteps.length} steps never ran; ${Math.round((Date.now() - started) / 1000)} s`,
      );
      // The contract under chaos: nothing lost, nothing duplicated, nothing reported wrongly. Every
      // chaos.run run completes. A consumer message may legitimately spend its 4 attempts (retries: 3)
      // on process deaths and 2 s leases lapsed under load — then it is dead with a failure that says
      // so (LEASE_EXPIRED "… ran past the lease (slow or hung), crashed, or lost its process" / "never started", or OKE1303 for a
      // run taken over past maxRecoveries), its attempts spent, and its run (if it started) failed
      // with the same failure; a delivered message's run completed. Anything else is listed with its
      // error, recoveries, attempts and failures in the assertion's own output.
      const notCompleted = (
        await fleet.query<{
          id: string;
          flow: string;
          recoveries: number;
          error: { code: string; message: string } | null;
          message: string | null;
        }>(
          `SELECT r.id, r.flow, r.recoveries, r.error, m.status AS message FROM dchaos.runs r
             LEFT JOIN dchaos.messages m ON m.id = r.id
           WHERE r.flow IN ('chaos.run', 'chaos.consume') AND r.status <> 'completed'`,
        )
      ).rows;
      const notDelivered = (
        await fleet.query<{
          id: string;
          attempts: number;
          status: string;
          failures: { code: string; message: string }[];
          run: string | null;
          run_error: { code: string; message: string } | null;
          recoveries: number | null;
        }>(
          `SELECT m.id, m.attempts, m.status, m.failures, r.status AS run, r.error AS run_error, r.recoveries
             FROM dchaos.messages m LEFT JOIN dchaos.runs r ON r.id = m.id
           WHERE m.signal = 'chaos.runs' AND m.status <> 'delivered'`,
        )
      ).rows;
      const deaths = /ran past the lease \(slow or hung\), crashed, or lost its process|never started/;
      const explainedDead = (m: (typeof notDelivered)[number]): boolean => {
        const last = m.failures.at(-1);
        if (m.status !== "dead" || last === undefined) return false;
        const why =
          (last.code === "LEASE_EXPIRED" && deaths.test(last.message) && m.attempts >= 4) ||
          last.code === "OKE1303";
        const sameAsRun =
          m.run === null ||
          (m.run === "failed" && m.run_error?.code === last.code && m.run_error.message === last.message);
        return why && sameAsRun;
      };
      const unexplainedDead = notDelivered.filter((m) => !explainedDead(m));
      // A failed run is only a consumer's whose message is dead with it (checked above).
      const unexplainedFailed = notCompleted.filter(
        (r) => r.flow !== "chaos.consume" || r.message !== "dead",
      );
      console.log(
        `durable chaos: ${notDelivered.length} consumer messages dead with their attempts spent by deaths: ` +
          JSON.stringify(
            notDelivered.map((m) => ({
              attempts: m.attempts,
              run: m.run,
              recoveries: m.recoveries,
              failure: m.failures.at(-1),
            })),
          ),
      );
      expect({ unexplainedFailed, unexplainedDead }).toEqual({ unexplainedFailed: [], unexplainedDead: [] });
      // Every chaos.run run completed, once per id; every consumer message delivered with its
      // completed run, or dead as above — none lost, none run twice.
      const completedIds = new Set(runs.map((r) => r.id));
      expect(ids.size).toBe(runs.length);
      for (let i = 0; i < RUNS; i++) expect(completedIds.has(`r${i}`), `r${i} completed`).toBe(true);
      expect(runs).toHaveLength(RUNS + CONSUMED - notDelivered.length);
      expect((messages.delivered ?? 0) + (messages.dead ?? 0)).toBe(CONSUMED);
      expect(messages.dead ?? 0).toBe(notDelivered.length);
      expect(missingSteps).toEqual([]);
      expect(unexplained).toEqual([]);
      expect(killed.size).toBe(KILLS);
      expect(inStep).toBeGreaterThan(0);
      expect(whileParked).toBeGreaterThan(0);
      expect(afterWake).toBeGreaterThan(0);
    },
    FULL ? 900_000 : 240_000,
  );
});
