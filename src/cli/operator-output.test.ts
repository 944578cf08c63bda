// The oke operator commands in-process, and one compiled: what they print and exit with against answers cut off, stalled or foreign, and against a real app's Console (caps, skipped ids, paging, counts, store outage).
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { fileURLToPath } from "node:url";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createApp } from "../app/app.ts";
import type { App } from "../app/types.ts";
import { clock, flow, on, signal } from "../index.ts";
import { replayLimits } from "../console/api.ts";
import { createTimeTravel } from "../clock/time-travel.ts";
import { createMemoryStore } from "../store/memory/memory-store.ts";
import type { Store } from "../store/types.ts";
import { withoutVitestEnv } from "../../test/support/built-oke.ts";
import { MISMATCH_FIX, UNKNOWN_FLOW_FIX } from "../durable/mismatch-log.ts";
import { until } from "../../test/conformance/app-fixture.ts";
import { heldTrial, startedByPreviousVersion } from "../../test/support/held-back.ts";
import { CommandError, createConsoleClient } from "./console-client.ts";
import { oke, type Ran } from "./run-oke.test-helper.ts";

const TOKEN = "alice-secret-0123456789";

async function listen(server: Server): Promise<string> {
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

async function close(server: Server): Promise<void> {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
}

describe("answers that are not a Console's, or not whole", () => {
  const servers: Server[] = [];
  afterAll(async () => {
    for (const s of servers) await close(s);
  });
  const serve = (handler: Parameters<typeof createServer>[1]): Promise<string> => {
    const s = createServer(handler);
    servers.push(s);
    return listen(s);
  };

  it("discard --pending against an app older than it: says so, and deletes nothing (its own endpoint, which an older app does not have)", async () => {
    const seen: string[] = [];
    const url = await serve((req, res) => {
      seen.push(`${req.method} ${req.url}`);
      res.writeHead(404, { "content-type": "application/json" });
      res.end(
        JSON.stringify({
          error: { code: "OKE1606", message: `console: no endpoint ${req.method} ${req.url}` },
        }),
      );
    });
    const r = await oke("discard", "jobs.x", "--pending", "--all", "--url", url, "--token", TOKEN);
    expect(seen).toEqual(["POST /api/signals/jobs.x/discard-pending"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(
      "oke: no endpoint POST /api/signals/jobs.x/discard-pending (404 OKE1606)\n" +
        "  fix: this app's okengine is older than oke discard --pending; upgrade the app to use it",
    );
  });

  it("oke schedules says how late the last fire came after its slot and how many slots it skipped, when it was not on time", async () => {
    const base = {
      flow: "ops.tick",
      cron: null,
      every: "1m",
      timezone: "UTC",
      overridden: false,
      paused: false,
      orphaned: false,
      nextFireAt: Date.UTC(2026, 11, 5, 1, 26),
      lastError: null,
    };
    const url = await serve((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(
        JSON.stringify({
          schedules: [
            // A catch-up after downtime: 37 s after its slot, five slots skipped.
            {
              ...base,
              name: "late",
              lastFiredAt: Date.UTC(2026, 11, 5, 1, 25, 37),
              lagMs: 37_000,
              missedRuns: 5,
            },
            // On time (a few ms late is on time).
            { ...base, name: "ontime", lastFiredAt: Date.UTC(2026, 11, 5, 1, 25), lagMs: 12, missedRuns: 0 },
            // An older app's answer: no lagMs, no missedRuns.
            { ...base, name: "older", lastFiredAt: Date.UTC(2026, 11, 5, 1, 25) },
          ],
        }),
      );
    });
    const r = await oke("schedules", "--url", url, "--token", TOKEN);
    expect(r.code).toBe(0);
    const lastFired = (name: string): string | undefined =>
      r.stdout
        .split("\n")
        .find((l) => l.startsWith(`${name} `))
        ?.trim()
        .split(/ {2,}/)[6];
    expect(lastFired("late")).toBe("2026-12-05 01:25:37Z (37s after its slot, 5 missed)");
    expect(lastFired("ontime")).toBe("2026-12-05 01:25:00Z");
    expect(lastFired("older")).toBe("2026-12-05 01:25:00Z");
  });

  it("oke run of a run with hundreds of entries prints the first 10 and the last 40, and says how to see the rest; --all prints every one", async () => {
    const timeline = Array.from({ length: 300 }, (_, i) => ({
      seq: i,
      kind: "step",
      name: `s${i}`,
      at: Date.UTC(2026, 11, 5) + i,
      tookMs: 1,
    }));
    const run = {
      id: "r_big",
      flow: "batch.big",
      status: "completed",
      createdAt: Date.UTC(2026, 11, 5),
      updatedAt: Date.UTC(2026, 11, 5),
      wakeAt: null,
      recoveries: 0,
    };
    // As the Console answers: the head (50) and the tail (100) and what it left out, unless asked for all.
    const asked: string[] = [];
    const url = await serve((req, res) => {
      asked.push(req.url ?? "");
      const whole = (req.url ?? "").endsWith("?timeline=all");
      res.writeHead(200, { "content-type": "application/json" });
      res.end(
        JSON.stringify({
          run,
          timeline: whole ? timeline : [...timeline.slice(0, 50), ...timeline.slice(-100)],
          ...(whole ? {} : { timelineOmitted: { count: 150, afterSeq: 49, beforeSeq: 200 } }),
          sleepingOn: null,
          ancestors: [],
          children: [],
        }),
      );
    });
    const names = (stdout: string): string[] =>
      stdout
        .split("\n")
        .map((l) => /^\s*\d+\s+step\s+(s\d+)\s/.exec(l)?.[1])
        .filter((x): x is string => x !== undefined);
    const short = await oke("run", "r_big", "--url", url, "--token", TOKEN);
    expect(short.code).toBe(0);
    const shown = names(short.stdout);
    expect(shown).toEqual([
      ...Array.from({ length: 10 }, (_, i) => `s${i}`),
      ...Array.from({ length: 40 }, (_, i) => `s${260 + i}`),
    ]);
    const lines = short.stdout.split("\n");
    const gap = lines.findIndex((l) => l.startsWith("… "));
    expect(lines[gap]).toBe("… 250 entries left out (oke run r_big --all, or --json) …");
    expect(lines[gap - 1]).toMatch(/\ss9\s/);
    expect(lines[gap + 1]).toMatch(/\ss260\s/);
    const all = await oke("run", "r_big", "--all", "--url", url, "--token", TOKEN);
    expect(names(all.stdout)).toHaveLength(300);
    expect(all.stdout).not.toContain("entries left out");
    // --json is every entry too; the plain view asks for the Console's cut.
    expect(
      JSON.parse((await oke("run", "r_big", "--json", "--url", url, "--token", TOKEN)).stdout).timeline,
    ).toHaveLength(300);
    expect(asked).toEqual([
      "/api/runs/r_big",
      "/api/runs/r_big?timeline=all",
      "/api/runs/r_big?timeline=all",
    ]);
  });

  it("a connection dropped mid-body is exit 2 with a line, not a stack", async () => {
    const url = await serve((_req, res) => {
      res.writeHead(200, { "content-type": "application/json", "content-length": "1000" });
      res.write('{"env":', () => res.socket?.destroy());
    });
    const client = createConsoleClient({ url, token: TOKEN });
    const e: unknown = await client.get("/api/overview").catch((x: unknown) => x);
    expect(e).toBeInstanceOf(CommandError);
    expect((e as CommandError).exitCode).toBe(2);
    expect((e as CommandError).message).toMatch(
      /^oke: the Console at http:\S+ did not finish its answer \(200, then /,
    );
    const r = await oke("status", "--url", url, "--token", TOKEN);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("did not finish its answer");
    // A POST cut off may have acted: the line says to check.
    const p = await oke("replay", "s", "--all", "--url", url, "--token", TOKEN);
    expect(p.code).toBe(2);
    expect(p.stderr).toContain("the action may or may not have been done");
  });

  it("a body that stalls past the timeout is exit 2: no answer within it", async () => {
    const url = await serve((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.write('{"env":'); // and never the rest
    });
    const client = createConsoleClient({ url, token: TOKEN, timeoutMs: 300 });
    const e: unknown = await client.get("/api/overview").catch((x: unknown) => x);
    expect(e).toBeInstanceOf(CommandError);
    expect((e as CommandError).exitCode).toBe(2);
    expect((e as CommandError).message).toContain("(200, then no answer within 300 ms)");
  });

  it("a 200 in JSON that is not the Console's is exit 2 for every command", async () => {
    const url = await serve((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end('{"status":"ok"}');
    });
    const commands = [
      ["status"],
      ["dead", "s"],
      ["runs"],
      ["run", "r1"],
      ["wake", "r1"],
      ["schedules"],
      ["schedules", "pause", "x"],
      ["schedules", "trigger", "x"],
      ["replay", "s", "--all"],
      ["discard", "s", "m1"],
    ];
    for (const args of commands) {
      const r = await oke(...args, "--url", url, "--token", TOKEN);
      expect([args, r.code, r.stdout]).toEqual([args, 2, ""]);
      expect(r.stderr).toContain(
        `oke: ${url} is not a Console: it answered 200 with JSON that is not the Console's`,
      );
    }
    // --json prints nothing that is not the Console's answer either.
    expect((await oke("status", "--json", "--url", url, "--token", TOKEN)).code).toBe(2);
  });

  it("status names a stranded signal this app does not declare; says when no instance is live that stranded work was not checked; an older app's answer prints no such line", async () => {
    const overview = {
      env: "prod",
      now: Date.UTC(2026, 11, 1, 12),
      signals: [],
      flows: [],
      recentFailures: { deadLetters: [], runs: [] },
      instances: 0,
      audit: [],
    };
    const gone = {
      name: "gone.jobs",
      pending: 2,
      inflight: 0,
      leaseLapsedAt: null,
      oldestPendingAgeMs: 65_000,
      declared: false,
    };
    let body: unknown = { ...overview, stranded: { checked: true, flows: [], signals: [gone] } };
    const url = await serve((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify(body));
    });
    const undeclared = await oke("status", "--url", url, "--token", TOKEN);
    expect(undeclared.code).toBe(0);
    expect(undeclared.stdout.split("\n").at(-1)).toBe(
      "stranded: 2 pending messages on gone.jobs, oldest 1m05s: no live instance consumes this signal and this app does not declare it (removed from the code?); deploy its worker again (they wait, none is lost), or remove what is pending with oke discard gone.jobs --pending --all",
    );
    body = { ...overview, stranded: { checked: false, flows: [], signals: [] } };
    const r = await oke("status", "--url", url, "--token", TOKEN);
    expect(r.code).toBe(0);
    expect(r.stdout.split("\n").at(-1)).toBe(
      "no live instance heartbeats to this store: cannot tell which runs and messages are stranded",
    );
    body = overview;
    const old = await oke("status", "--url", url, "--token", TOKEN);
    expect(old.code).toBe(0);
    expect(old.stdout).not.toContain("stranded");
  });

  it("status says 20+ when more runs are held back than the overview lists, and names no reason it does not know; runs --held refuses an older app's unfiltered list", async () => {
    const heldRun = (i: number, code: string) => ({
      id: `r_${i}`,
      flow: "trips.x",
      status: "running",
      createdAt: 0,
      updatedAt: 0,
      wakeAt: null,
      recoveries: 0,
      held: { code, message: "waiting for a reason", since: 0 },
    });
    const overview = {
      env: "prod",
      now: Date.UTC(2026, 11, 1, 12),
      signals: [],
      flows: [],
      recentFailures: { deadLetters: [], runs: [] },
      instances: 1,
      audit: [],
      heldBack: {
        runs: Array.from({ length: 20 }, (_, i) => heldRun(i, "OKE1301")),
        more: true,
        fix: MISMATCH_FIX,
      },
    };
    let body: unknown = overview;
    const url = await serve((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify(body));
    });
    const many = await oke("status", "--url", url, "--token", TOKEN);
    expect([many.code, many.stdout.split("\n").at(-1)]).toEqual([
      0,
      "20+ runs held back (journal does not match the code): oke runs --held",
    ]);
    body = { ...overview, heldBack: { runs: [heldRun(1, "OKE1307")], more: false, fix: UNKNOWN_FLOW_FIX } };
    expect((await oke("status", "--url", url, "--token", TOKEN)).stdout.split("\n").at(-1)).toBe(
      "1 run held back (taken by an instance without their flow): oke runs --held",
    );
    // Its advice, in oke run and under oke runs.
    body = { run: heldRun(1, "OKE1307"), timeline: [], sleepingOn: null, ancestors: [], children: [] };
    expect((await oke("run", "r_1", "--url", url, "--token", TOKEN)).stdout.split("\n")[3]).toBe(
      `  ${UNKNOWN_FLOW_FIX}`,
    );
    body = { items: [heldRun(1, "OKE1307"), heldRun(2, "OKE1301")], next: null };
    expect((await oke("runs", "--url", url, "--token", TOKEN)).stdout.split("\n").slice(-2)).toEqual([
      `held back (OKE1307): ${UNKNOWN_FLOW_FIX}`,
      `held back (OKE1301): ${MISMATCH_FIX}`,
    ]);
    body = { ...overview, heldBack: { runs: [heldRun(1, "E_OTHER")], more: false, fix: MISMATCH_FIX } };
    expect((await oke("status", "--url", url, "--token", TOKEN)).stdout.split("\n").at(-1)).toBe(
      "1 run held back (given back with a reason): oke runs --held",
    );
    // A reason with no advice: the run's line says what the store says, and nothing more.
    body = {
      run: heldRun(1, "E_OTHER"),
      timeline: [],
      sleepingOn: null,
      ancestors: [],
      children: [],
      heldFix: null,
    };
    const run = await oke("run", "r_1", "--url", url, "--token", TOKEN);
    expect(run.stdout.split("\n").slice(0, 4)).toEqual([
      "run r_1  flow trips.x  running · held back",
      "created 1970-01-01 00:00:00Z  updated 1970-01-01 00:00:00Z  recoveries 0",
      "held back since 1970-01-01 00:00:00Z: E_OTHER waiting for a reason",
      "",
    ]);
    const { held: _held, ...plain } = heldRun(2, "OKE1301");
    body = { items: [heldRun(1, "OKE1301"), plain], next: null };
    const old = await oke("runs", "--held", "--url", url, "--token", TOKEN);
    expect([old.code, old.stdout]).toEqual([1, ""]);
    expect(old.stderr).toBe(
      `oke: the Console at ${url} does not filter held-back runs (an older okengine): it listed others too`,
    );
  });

  it("run of a sleeper: a wake time past is due since, and oke wake is suggested only ahead of it and never for a stranded run; an older app's answer prints as before", async () => {
    const at = Date.UTC(2026, 11, 1, 12);
    const run = {
      id: "r_1",
      flow: "trips.nap",
      status: "sleeping",
      createdAt: at,
      updatedAt: at,
      wakeAt: at + 3_600_000,
      recoveries: 0,
    };
    const detail = { run, timeline: [], sleepingOn: "nap", ancestors: [], children: [] };
    let body: unknown = detail;
    const url = await serve((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify(body));
    });
    const third = async (): Promise<string | undefined> =>
      (await oke("run", "r_1", "--url", url, "--token", TOKEN)).stdout.split("\n")[2];
    const ahead = "sleeping on nap until 2026-12-01 13:00:00Z  (oke wake r_1 to wake it now)";
    expect(await third()).toBe(ahead);
    body = { ...detail, now: at, stranded: false };
    expect(await third()).toBe(ahead);
    // Woken (or overdue): its wake time has passed, and waking it again would change nothing.
    body = { ...detail, run: { ...run, wakeAt: at }, now: at + 1_000, stranded: false };
    expect(await third()).toBe(
      "sleeping on nap, due since 2026-12-01 12:00:00Z: an instance resumes it as soon as one is free",
    );
    body = { ...detail, run: { ...run, wakeAt: at }, now: at + 1_000, stranded: null };
    expect(await third()).toBe(
      "sleeping on nap, due since 2026-12-01 12:00:00Z: no instance is live; it resumes once an instance that has flow trips.nap runs",
    );
    // A running run no live instance has the flow of: the same line, under what it is.
    body = {
      ...detail,
      run: { ...run, status: "running", wakeAt: null },
      sleepingOn: null,
      now: at,
      stranded: true,
      strandedFix: "It resumes … (deploy it again).",
    };
    const running = await oke("run", "r_1", "--url", url, "--token", TOKEN);
    expect(running.stdout.split("\n").slice(2, 4)).toEqual([
      "stranded: no live instance has flow trips.nap",
      "  It resumes … (deploy it again).",
    ]);
  });

  it("status gives held-back runs a HELD column of their own, out of RUNNING; n+ when the Console counted the newest only; discard --all says what it left, and who delivers it", async () => {
    const overview = {
      env: "prod",
      now: Date.UTC(2026, 11, 1, 12),
      signals: [],
      flows: [
        { name: "trips.x", durable: true, runs: { running: 30, completed: 2 }, held: { running: 25 } },
        { name: "trips.y", durable: true, runs: { compensating: 3 }, held: { compensating: 1 } },
      ],
      recentFailures: { deadLetters: [], runs: [] },
      instances: 1,
      audit: [],
      heldBack: { runs: [], more: true, fix: MISMATCH_FIX, allCounted: false },
    };
    let body: unknown = overview;
    const url = await serve((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify(body));
    });
    const table = async (): Promise<string[]> =>
      (await oke("status", "--url", url, "--token", TOKEN)).stdout.split("\n").slice(4, 7);
    expect(await table()).toEqual([
      "FLOW     RUNNING  SLEEPING  COMPENSATING  HELD  COMPLETED  FAILED",
      "trips.x        5         0             0   25+          2       0",
      "trips.y        0         0             2    1+          0       0",
    ]);
    body = { ...overview, heldBack: { ...overview.heldBack, allCounted: true } };
    expect(await table()).toEqual([
      "FLOW     RUNNING  SLEEPING  COMPENSATING  HELD  COMPLETED  FAILED",
      "trips.x        5         0             0    25          2       0",
      "trips.y        0         0             2     1          0       0",
    ]);

    const discard = async (backlog: unknown): Promise<string> => {
      body = { discarded: [], count: 0, more: false, skipped: [], backlog };
      const r = await oke("discard", "jobs.x", "--all", "--url", url, "--token", TOKEN);
      expect(r.code).toBe(0);
      return r.stdout;
    };
    expect(await discard({ pending: 1, inflight: 0, liveConsumer: true, declared: true })).toBe(
      "discarded 0 dead letters of jobs.x; its 1 pending message is not a dead letter (discard removes dead letters only): a live instance consumes this signal and delivers it",
    );
    expect(await discard({ pending: 4, inflight: 2, liveConsumer: null, declared: true })).toBe(
      "discarded 0 dead letters of jobs.x; its 4 pending and 2 inflight messages are not dead letters (discard removes dead letters only): no live instance heartbeats to this store, so whether one consumes this signal cannot be told",
    );
    expect(await discard({ pending: 0, inflight: 0, liveConsumer: false, declared: true })).toBe(
      "discarded 0 dead letters of jobs.x",
    );
  });

  it("dead prints each attempt whose lease lapsed with no outcome recorded, and where a replayed delivery begins, from the Console's history; an older app's failures print as before", async () => {
    const at = Date.UTC(2026, 11, 1, 12);
    const lapsedText = (n: number) =>
      `no outcome recorded — its lease (30 s) lapsed before it settled (handler crashed, hung or ran past the lease, its process died, or it never left the prefetch buffer); reclaimed as attempt ${n + 1}`;
    const failures = [
      { code: "E_JOB", message: "broke", at, attempt: 1 },
      { code: "LEASE_EXPIRED", message: "attempt 4 did not finish within its lease", at, attempt: 4 },
    ];
    const message = {
      id: "m_slow",
      signal: "jobs",
      key: null,
      status: "dead",
      attempts: 2,
      replays: 1,
      failures,
      payload: { n: 1 },
      createdAt: at,
      updatedAt: at,
    };
    const history = [
      { ...failures[0], outcome: "failed", delivery: 0 },
      { outcome: "lapsed", delivery: 0, attempt: 2, message: lapsedText(2) },
      { outcome: "lapsed", delivery: 0, attempt: 3, message: lapsedText(3) },
      { ...failures[1], outcome: "failed", delivery: 0 },
      { outcome: "lapsed", delivery: 1, attempt: 1, message: lapsedText(1) },
    ];
    let body: unknown;
    const url = await serve((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify(body));
    });
    body = { items: [{ ...message, lapsed: [1], history }], next: null };
    const now = await oke("dead", "jobs", "--url", url, "--token", TOKEN);
    expect(now.code).toBe(0);
    expect(now.stdout.split("\n").slice(3)).toEqual([
      '  payload {"n":1}',
      "  attempt 1  2026-12-01 12:00:00Z  E_JOB  broke",
      `  attempt 2  ${lapsedText(2)}`,
      `  attempt 3  ${lapsedText(3)}`,
      "  attempt 4  2026-12-01 12:00:00Z  LEASE_EXPIRED  attempt 4 did not finish within its lease",
      "  -- replay 1 of 1: attempts count from 1 again --",
      `  attempt 1  ${lapsedText(1)}`,
    ]);
    // An older app sends no history: its failures, split where the attempt number does not go up.
    body = { items: [message], next: null };
    const old = await oke("dead", "jobs", "--url", url, "--token", TOKEN);
    expect(old.stdout.split("\n").slice(4)).toEqual([
      "  attempt 1  2026-12-01 12:00:00Z  E_JOB  broke",
      "  attempt 4  2026-12-01 12:00:00Z  LEASE_EXPIRED  attempt 4 did not finish within its lease",
    ]);
  });

  it("run explains its recoveries in one line under the counts: the Console's words, or from an older app the same without the bound", async () => {
    const run = {
      id: "r_1",
      flow: "trips.x",
      status: "completed",
      createdAt: 0,
      updatedAt: 0,
      wakeAt: null,
      recoveries: 2,
    };
    const recovered =
      'recovered 2 times (of at most 10: durable.maxRecoveries): its holder stopped renewing the lease (process killed, crashed or stalled) and another instance took the run over once it lapsed; the entry after a takeover includes that wait. The log line "durable run "r_1" (trips.x) taken over from <holder>" names the holder';
    let body: unknown;
    const url = await serve((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify(body));
    });
    const detail = { run, timeline: [], sleepingOn: null, ancestors: [], children: [], heldFix: null };
    body = { ...detail, maxRecoveries: 10, recovered };
    const now = await oke("run", "r_1", "--url", url, "--token", TOKEN);
    expect(now.stdout.split("\n").slice(0, 4)).toEqual([
      "run r_1  flow trips.x  completed",
      "created 1970-01-01 00:00:00Z  updated 1970-01-01 00:00:00Z  recoveries 2",
      recovered,
      "",
    ]);
    body = detail;
    const old = await oke("run", "r_1", "--url", url, "--token", TOKEN);
    expect(old.stdout.split("\n")[2]).toBe(recovered.replace(" (of at most 10: durable.maxRecoveries)", ""));
    // None: no line.
    body = { ...detail, run: { ...run, recoveries: 0 }, maxRecoveries: 10, recovered: null };
    expect((await oke("run", "r_1", "--url", url, "--token", TOKEN)).stdout.split("\n")[2]).toBe("");
  });

  it("exits quietly when its reader goes away (oke dead … | head)", async () => {
    const items = Array.from({ length: 3_000 }, (_, i) => ({
      id: `m_${i}`,
      signal: "s",
      key: null,
      status: "dead",
      attempts: 1,
      failures: [{ code: "E", message: "x".repeat(80), at: 0, attempt: 1 }],
      payload: { text: "y".repeat(200) },
      createdAt: 0,
      updatedAt: 0,
    }));
    const body = JSON.stringify({ items, next: null });
    const url = await serve((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(body);
    });
    // bin/oke.js as a checkout runs it (the sources, through tsx), as the operator who found it did.
    const repo = fileURLToPath(new URL("../../", import.meta.url));
    const child = spawn(
      process.execPath,
      [`${repo}bin/oke.js`, "dead", "s", "--url", url, "--token", TOKEN],
      {
        cwd: repo,
        env: withoutVitestEnv(process.env),
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    let stderr = "";
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    // Read the first chunk, then close the pipe: the rest (far more than a pipe holds) has no reader.
    child.stdout.once("data", () => child.stdout.destroy());
    const code = await new Promise<number | null>((r) => child.on("close", r));
    expect(stderr).toBe("");
    expect(code).toBe(0);
  }, 120_000);
});

// A real app in this process, its Console on a free port.
const failing = signal.once<{ n: number }>("jobs.fail", { retries: 0 });
const failWorker = on(
  failing,
  flow("jobs.failWork", {
    do: ({ n }: { n: number }) => {
      throw new Error(`job ${n} broke`);
    },
  }),
);
const broken = flow("trips.broken", {
  durable: true,
  do: async (_: { n: number }, fx) => {
    await fx.step("try", () => 1);
    throw new Error("trip broke");
  },
});
const fine = flow("trips.fine", {
  durable: true,
  do: async ({ n }: { n: number }, fx) => fx.step("ok", () => n),
});

// A plain flow emits to a durable consumer: the consumer's run has a parent no run is stored for.
const relay = signal.once<{ n: number }>("jobs.relay");
const relayWorker = on(
  relay,
  flow("jobs.relayWork", {
    durable: true,
    do: async ({ n }: { n: number }, fx) => fx.step("relay", () => n),
  }),
);
const plainRelay = flow("trips.plainRelay", {
  do: async ({ n }: { n: number }, fx) => {
    await fx.emit(relay, { n });
  },
});

describe("against a real app's Console", () => {
  let app: App;
  let url: string;
  let down = false;
  const cli = (...args: string[]): Promise<Ran> => oke(...args, "--url", url, "--token", TOKEN);
  const deadIds = async (): Promise<string[]> => {
    const r = await cli("dead", "jobs.fail", "--json");
    return (JSON.parse(r.stdout) as { items: Array<{ id: string }> }).items.map((m) => m.id);
  };
  // The store's health as a driver reports it during an outage.
  const withOutage = (s: Store): Store =>
    new Proxy(s, {
      get(target, prop) {
        if (prop === "health")
          return () =>
            down ? { ok: false, since: Date.UTC(2026, 11, 3), reason: "ECONNREFUSED" } : { ok: true };
        const v: unknown = Reflect.get(target, prop, target);
        return typeof v === "function" ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      },
    });

  const inner = createMemoryStore();
  beforeAll(async () => {
    app = createApp({
      modules: [{ failWorker, broken, fine, relayWorker, plainRelay }],
      env: "test",
      store: withOutage(inner),
      config: { console: { port: 0, tokens: { alice: TOKEN } } },
    });
    const started = await app.start({ port: 0, host: "127.0.0.1" });
    url = started.console!.url;
  });
  afterAll(async () => {
    await app.stop({ timeoutMs: 2_000 });
  });
  afterEach(() => {
    down = false;
  });

  it("status counts every failed run, not the ten the overview lists", async () => {
    for (let n = 0; n < 15; n++) await app.invoke(broken, { n }).catch(() => undefined);
    await app.idle();
    const r = await cli("status");
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("15 failed runs: oke runs --status failed");
  });

  it("runs --flow says why a flow's list is empty: no such flow (exit 1, naming the durable ones), or one that keeps no runs; runs of a flow the app lacks are listed with a note", async () => {
    const missing = await cli("runs", "--flow", "trips.nosuch");
    expect([missing.code, missing.stdout]).toEqual([1, ""]);
    expect(missing.stderr).toBe(
      `oke: no flow "trips.nosuch" in the app at ${url}, and no runs of one in its store; its durable flows: jobs.relayWork, trips.broken, trips.fine`,
    );
    expect(await cli("runs", "--flow", "trips.plainRelay")).toMatchObject({
      code: 0,
      stdout: 'no runs: flow "trips.plainRelay" is not durable, so it keeps no runs',
    });
    // A previous version's flow: its runs are listed, with what that means.
    await inner.startRun({
      id: "r_retired",
      flow: "trips.retired",
      input: null,
      parentRunId: null,
      owner: "old/1",
      now: Date.now(),
      leaseMs: 30_000,
    });
    await inner.releaseRun({
      runId: "r_retired",
      owner: "old/1",
      now: Date.now(),
      retryAt: Date.now() + 60_000,
    });
    const retired = await cli("runs", "--flow", "trips.retired");
    expect(retired.code).toBe(0);
    expect(retired.stdout).toContain("r_retired");
    expect(retired.stdout.split("\n").at(-1)).toBe(
      `flow "trips.retired" is not in the app at ${url} (removed or renamed?); oke status says whether a live instance runs it`,
    );
  });

  it("the next-page line is the same command, every option kept and shell-quoted, plus --cursor", async () => {
    for (let n = 0; n < 3; n++) await app.invoke(fine, { n });
    const r = await cli("runs", "--flow", "trips.fine", "--since", "2020-01-01 00:00", "--limit", "2");
    expect(r.code).toBe(0);
    const more = /^more: (.*) --cursor (\S+)$/m.exec(r.stdout);
    expect(more?.[1]).toBe(`oke runs --flow trips.fine --since '2020-01-01 00:00' --limit 2 --url ${url}`);
    // Pasted back (the shell would unquote it), the next page keeps the limit: one run left of three.
    const page2 = await oke(
      "runs",
      "--flow",
      "trips.fine",
      "--since",
      "2020-01-01 00:00",
      "--limit",
      "2",
      "--url",
      url,
      "--token",
      TOKEN,
      "--cursor",
      more![2]!.replace(/^'|'$/g, ""),
      "--json",
    );
    expect((JSON.parse(page2.stdout) as { items: unknown[] }).items).toHaveLength(1);

    for (let n = 0; n < 3; n++) await app.emit(failing, { n });
    await app.idle();
    const dead = await cli("dead", "jobs.fail", "--limit", "1");
    expect(dead.stdout).toMatch(
      new RegExp(`\\nmore: oke dead jobs\\.fail --limit 1 --url ${url} --cursor \\S+$`),
    );
    await cli("discard", "jobs.fail", "--all");
  });

  it("a cursor that is no previous page's next is refused (exit 1, the Console's 400), never page 1 again", async () => {
    for (let n = 0; n < 2; n++) await app.invoke(fine, { n });
    await app.emit(failing, { n: 1 });
    await app.idle();
    for (const args of [
      ["runs", "--limit", "1", "--cursor", "garbage"],
      ["dead", "jobs.fail", "--limit", "1", "--cursor", "garbage"],
    ]) {
      const r = await cli(...args);
      expect([args[0], r.code, r.stdout, r.stderr]).toEqual([
        args[0],
        1,
        "",
        'oke: the Console refused: cursor must be the "next" of a previous page, got "garbage" (400 OKE1605)',
      ]);
    }
    await cli("discard", "jobs.fail", "--all");
  });

  it("oke run names a parent no run is stored for (a plain flow's invocation) instead of leaving it out", async () => {
    await app.invoke(plainRelay, { n: 1 });
    await app.idle();
    const runs = await cli("runs", "--flow", "jobs.relayWork", "--json");
    const [consumer] = (JSON.parse(runs.stdout) as { items: Array<{ id: string; parentRunId: string }> })
      .items;
    expect(consumer!.parentRunId).toEqual(expect.any(String));
    const r = await cli("run", consumer!.id);
    expect(r.code).toBe(0);
    expect(r.stdout.split("\n").slice(0, 3)).toEqual([
      `run ${consumer!.id}  flow jobs.relayWork  completed`,
      expect.stringMatching(/^created /),
      `parent: flow invocation ${consumer!.parentRunId} (no run stored: not durable, or pruned — no timeline)`,
    ]);
    // What the line explains: the id is no run.
    const parent = await cli("run", consumer!.parentRunId);
    expect([parent.code, parent.stderr]).toEqual([1, `oke: no run "${consumer!.parentRunId}" (404 OKE1606)`]);
  });

  it("dead shows each message's replays and where a replayed delivery's attempts begin", async () => {
    await cli("discard", "jobs.fail", "--all");
    await app.emit(failing, { n: 42 });
    await app.idle();
    const [id] = await deadIds();
    const before = await cli("dead", "jobs.fail");
    expect(before.stdout).toContain(`${id}  attempts 1  replays 0  key -  `);
    expect(before.stdout).not.toContain("-- replay");
    for (let i = 0; i < 2; i++) {
      await cli("replay", "jobs.fail", id!);
      await app.idle();
    }
    const after = await cli("dead", "jobs.fail");
    const lines = after.stdout.split("\n");
    const head = lines.findIndex((l) => l.startsWith(id!));
    expect(lines[head]).toContain(`${id}  attempts 1  replays 2  key -  `);
    expect(lines.slice(head + 2).map((l) => l.replace(/ {2}\d{4}-\S+ \S+ {2}/, " <at> "))).toEqual([
      "  attempt 1 <at> Error  job 42 broke",
      "  -- replay 1 of 2: attempts count from 1 again --",
      "  attempt 1 <at> Error  job 42 broke",
      "  -- replay 2 of 2: attempts count from 1 again --",
      "  attempt 1 <at> Error  job 42 broke",
    ]);
    await cli("discard", "jobs.fail", "--all");
  });

  it("discard names the ids it skipped, as replay does; --all past the cap says to run it again", async () => {
    for (let n = 0; n < 3; n++) await app.emit(failing, { n });
    await app.idle();
    const [first] = await deadIds();
    const d = await cli("discard", "jobs.fail", first!, "nope1");
    expect(d.code).toBe(0);
    expect(d.stdout).toBe(
      `discarded 1 dead letter of jobs.fail\n${first}\nnot dead letters of jobs.fail (skipped): nope1`,
    );
    const dry = await cli("discard", "jobs.fail", "nope2", "--dry-run");
    expect(dry.stdout).toContain("not dead letters of jobs.fail (skipped): nope2");

    const saved = replayLimits.all;
    replayLimits.all = 1;
    try {
      const ids = await deadIds();
      expect(ids).toHaveLength(2);
      const rep = await cli("replay", "jobs.fail", "--all");
      expect(rep.stdout).toBe(
        `replayed 1 dead letter of jobs.fail (and more past the cap: run it again)\n${ids[0]}`,
      );
      await app.idle();
      const dryAll = await cli("discard", "jobs.fail", "--all", "--dry-run");
      expect(dryAll.stdout).toContain(
        "dry run: would discard 1 dead letter of jobs.fail (and more past the cap: run it again); nothing changed",
      );
      const disc = await cli("discard", "jobs.fail", "--all");
      expect(disc.stdout).toBe(
        `discarded 1 dead letter of jobs.fail (and more past the cap: run it again)\n${ids[0]}`,
      );
      const last = await cli("discard", "jobs.fail", "--all");
      expect(last.stdout).toBe(`discarded 1 dead letter of jobs.fail\n${ids[1]}`);
    } finally {
      replayLimits.all = saved;
    }
  });

  it("replay of named ids exits 1 when none was (or would be) replayed; --all with nothing dead exits 0", async () => {
    await cli("discard", "jobs.fail", "--all");
    const none = await cli("replay", "jobs.fail", "nope1", "nope2");
    expect(none.code).toBe(1);
    expect(none.stdout).toBe(
      "replayed 0 dead letters of jobs.fail\nnot dead letters of jobs.fail (skipped): nope1, nope2",
    );
    expect(none.stderr).toBe(
      "oke: nothing replayed: none of the 2 ids given is a dead letter of jobs.fail (oke dead jobs.fail lists them)",
    );
    const dry = await cli("replay", "jobs.fail", "nope1", "--dry-run");
    expect(dry.code).toBe(1);
    expect(dry.stderr).toBe(
      "oke: nothing would be replayed: nope1 is not a dead letter of jobs.fail (oke dead jobs.fail lists them)",
    );
    // --json: the answer on stdout, the same exit code.
    const json = await cli("replay", "jobs.fail", "nope1", "--json");
    expect(json.code).toBe(1);
    expect(JSON.parse(json.stdout)).toMatchObject({ replayed: [] });
    // Nothing dead and --all: nothing was asked of any message, nothing failed.
    const all = await cli("replay", "jobs.fail", "--all");
    expect([all.code, all.stdout]).toEqual([0, "replayed 0 dead letters of jobs.fail"]);
    // One of the ids replayed: done (exit 0), the other named as skipped.
    await app.emit(failing, { n: 9 });
    await app.idle();
    const [dead] = await deadIds();
    const some = await cli("replay", "jobs.fail", dead!, "nope3");
    expect(some.code).toBe(0);
    expect(some.stdout).toBe(
      `replayed 1 dead letter of jobs.fail\n${dead}\nnot dead letters of jobs.fail (skipped): nope3`,
    );
    await app.idle();
    await cli("discard", "jobs.fail", "--all");
  });

  it("discard of named ids exits 1 when none was (or would be) discarded, like replay; some discarded exits 0", async () => {
    await cli("discard", "jobs.fail", "--all");
    const none = await cli("discard", "jobs.fail", "nope1");
    expect(none.code).toBe(1);
    expect(none.stdout).toBe(
      "discarded 0 dead letters of jobs.fail\nnot dead letters of jobs.fail (skipped): nope1",
    );
    expect(none.stderr).toBe(
      "oke: nothing discarded: nope1 is not a dead letter of jobs.fail (oke dead jobs.fail lists them)",
    );
    const dry = await cli("discard", "jobs.fail", "nope1", "nope2", "--dry-run");
    expect(dry.code).toBe(1);
    expect(dry.stderr).toBe(
      "oke: nothing would be discarded: none of the 2 ids given is a dead letter of jobs.fail (oke dead jobs.fail lists them)",
    );
    const json = await cli("discard", "jobs.fail", "nope1", "--json");
    expect(json.code).toBe(1);
    expect(JSON.parse(json.stdout)).toMatchObject({ discarded: [] });
    await app.emit(failing, { n: 10 });
    await app.idle();
    const [dead] = await deadIds();
    const some = await cli("discard", "jobs.fail", dead!, "nope3");
    expect(some.code).toBe(0);
    expect(some.stdout).toBe(
      `discarded 1 dead letter of jobs.fail\n${dead}\nnot dead letters of jobs.fail (skipped): nope3`,
    );
  });

  it("says plainly that the app's store is unavailable (exit 1: the refusal, since when, when to try again)", async () => {
    down = true;
    const r = await cli("status");
    expect(r.code).toBe(1);
    expect(r.stdout).toBe("");
    expect(r.stderr).toBe(
      "oke: the Console could not answer: the app's store is unavailable (since 2026-12-03T00:00:00.000Z); try again in 2 s (503 OKE1610)\n" +
        "  fix: The app probes the store until it can commit again; its log says why the store failed.",
    );
    down = false;
    expect((await cli("status")).code).toBe(0);
  });
});

// Two apps on one store: the Console's app, and a legacy app with a durable flow and a signal's worker.
const legacyJobs = signal.once<{ n: number }>("legacy.jobs", { retries: 0 });
const legacyWorker = on(legacyJobs, flow("legacy.work", { do: () => undefined }));
const legacyWait = flow("legacy.wait", {
  durable: true,
  do: async (_: { n: number }, fx) => {
    await fx.clock.sleep("trial-end", "1h");
  },
});
const jobsToEmit = signal.once<{ n: number }>("legacy.jobs", { retries: 0, optional: true });
// A clock only the legacy app declares: with that app gone, nothing fires it.
const legacyDigest = on(
  clock("legacy.digest", { every: "1m" }),
  flow("legacy.digest", { do: () => undefined }),
);

// A durable flow the Console's app has, asleep for an hour; a signal a previous version emitted to.
const napping = flow("trips.napping", {
  durable: true,
  do: async (_: { n: number }, fx) => {
    await fx.clock.sleep("nap", "1h");
  },
});
const goneJobs = signal.once<{ n: number }>("notify.send", { retries: 0, optional: true });

describe("stranded work in oke status", () => {
  const stops: Array<() => Promise<void>> = [];
  afterAll(async () => {
    while (stops.length > 0) await stops.pop()!();
  });

  it("after the tables, one line per flow, signal and due clock no live instance serves, with what to do; exit 0", async () => {
    const time = createTimeTravel(Date.UTC(2026, 11, 1, 12));
    const store = createMemoryStore();
    const consoleApp = createApp({
      modules: [{ fine, jobsToEmit }],
      env: "test",
      clock: time,
      store,
      config: { console: { port: 0, tokens: { alice: TOKEN } } },
    });
    stops.push(() => consoleApp.stop({ timeoutMs: 2_000 }));
    const url = (await consoleApp.start({ port: 0, host: "127.0.0.1" })).console!.url;
    const legacy = createApp({
      modules: [{ legacyJobs, legacyWorker, legacyWait, legacyDigest }],
      env: "test",
      clock: time,
      store,
    });
    await legacy.start({ port: 0, host: "127.0.0.1" });
    for (let n = 0; n < 2; n++) await legacy.invoke(legacyWait, { n });
    const cli = (...args: string[]): Promise<Ran> => oke(...args, "--url", url, "--token", TOKEN);
    expect((await cli("status")).stdout).not.toContain("stranded");

    await legacy.stop();
    for (let n = 0; n < 3; n++) await consoleApp.emit(jobsToEmit, { n });
    time.advance(65_000);
    const r = await cli("status");
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/· 1 instance alive ·/);
    expect(r.stdout.split("\n").slice(-3)).toEqual([
      "stranded: 2 runs of legacy.wait (sleeping 2, next due 2026-12-01 13:00:00Z): no live instance runs this flow; deploy it again (they resume where they stopped), list them: oke runs --flow legacy.wait",
      "stranded: 3 pending messages on legacy.jobs, oldest 1m05s: no live instance consumes this signal; deploy its worker again (they wait, none is lost), or remove what is pending with oke discard legacy.jobs --pending --all",
      // Its slot at 12:01 passed with nothing to fire it; it still reads active.
      "stranded: clock legacy.digest (every 1m, due since 2026-12-01 12:01:00Z, never fired): active, but no live instance declares it, so nothing fires it. " +
        "Deploy an instance whose code declares this clock: it fires the latest missed slot once at boot (missedRuns counts the others). " +
        "If the clock was removed from the code on purpose, pause it: the next boot of the app marks it orphaned. (oke schedules pause legacy.digest)",
    ]);
    // The tables keep their format: the legacy flow, gone from the Console's app, has no row there.
    expect(r.stdout).not.toMatch(/^legacy\.wait /m);
    // oke schedules says stranded where oke status does, not active; an interval shows no zone.
    const sch = await cli("schedules");
    expect(sch.code).toBe(0);
    const [header, digest] = sch.stdout.split("\n");
    const cols = (line: string): string[] => line.trim().split(/ {2,}/);
    expect(cols(header!)).toEqual([
      "SCHEDULE",
      "FLOW",
      "SPEC",
      "ZONE",
      "STATE",
      "NEXT FIRE",
      "LAST FIRED",
      "LAST ERROR",
    ]);
    expect(cols(digest!)).toEqual([
      "legacy.digest",
      "legacy.digest",
      "every 1m",
      "-",
      "stranded",
      "2026-12-01 12:01:00Z",
      "-",
      "-",
    ]);
  });
});

// A broadcast with one subscriber that always throws, one that never does; a cron clock an operator edits.
const newsPosted = signal.broadcast<{ n: number }>("news.posted");
const newsRead = on(newsPosted, flow("news.read", { do: () => undefined }));
const newsBreak = on(
  newsPosted,
  flow("news.break", {
    do: ({ n }: { n: number }) => {
      throw new Error(`news ${n} broke`);
    },
  }),
);
const parisReport = on(
  clock("reports.paris", { cron: "0 3 * * *", timezone: "Europe/Paris", overridable: true }),
  flow("reports.paris", { do: () => undefined }),
);

describe("broadcast failures and edited schedules in oke status and oke schedules", () => {
  const stops: Array<() => Promise<void>> = [];
  afterAll(async () => {
    while (stops.length > 0) await stops.pop()!();
  });

  it("a subscriber whose every copy failed is not shown as simply delivered: its row and a line after the tables say so", async () => {
    const app = createApp({
      modules: [{ newsRead, newsBreak }],
      env: "test",
      store: createMemoryStore(),
      config: { console: { port: 0, tokens: { alice: TOKEN } } },
    });
    stops.push(() => app.stop({ timeoutMs: 2_000 }));
    const url = (await app.start({ port: 0, host: "127.0.0.1" })).console!.url;
    for (let n = 1; n <= 40; n++) await app.emit(newsPosted, { n });
    await app.idle();
    const r = await oke("status", "--url", url, "--token", TOKEN);
    expect(r.code).toBe(0);
    const lines = r.stdout.split("\n");
    expect(lines.find((l) => l.includes("copies for news.break"))).toMatch(
      /^ {2}↳ copies for news\.break \(40 failed\) +copies +0 +0 +0 +40 +- +- *$/,
    );
    expect(lines.find((l) => l.includes("copies for news.read"))).toMatch(
      /^ {2}↳ copies for news\.read +copies /,
    );
    expect(lines.at(-1)).toMatch(
      /^40 broadcast copies of news\.posted failed in news\.break \(counted as delivered; broadcast does not retry\), newest: Error news \d+ broke$/,
    );
  });

  it("an every schedule edited from a cron in a zone shows no zone", async () => {
    const app = createApp({
      modules: [{ parisReport }],
      env: "test",
      store: createMemoryStore(),
      config: { console: { port: 0, tokens: { alice: TOKEN } } },
    });
    stops.push(() => app.stop({ timeoutMs: 2_000 }));
    const url = (await app.start({ port: 0, host: "127.0.0.1" })).console!.url;
    const cli = (...args: string[]): Promise<Ran> => oke(...args, "--url", url, "--token", TOKEN);
    const cols = (line: string): string[] => line.trim().split(/ {2,}/);
    expect(cols((await cli("schedules")).stdout.split("\n")[1]!).slice(0, 5)).toEqual([
      "reports.paris",
      "reports.paris",
      "cron 0 3 * * *",
      "Europe/Paris",
      "active",
    ]);
    expect((await cli("schedules", "edit", "reports.paris", "--every", "30s")).code).toBe(0);
    // The stored zone is kept (display only): the API still answers it.
    const json = JSON.parse((await cli("schedules", "--json")).stdout) as {
      schedules: Array<{ timezone: string }>;
    };
    expect(json.schedules[0]!.timezone).toBe("Europe/Paris");
    expect(cols((await cli("schedules")).stdout.split("\n")[1]!).slice(0, 5)).toEqual([
      "reports.paris",
      "reports.paris",
      "every 30s (edited)",
      "-",
      "active",
    ]);
  });
});

describe("held-back runs in oke run, oke runs and oke status", () => {
  const stops: Array<() => Promise<void>> = [];
  afterAll(async () => {
    while (stops.length > 0) await stops.pop()!();
  });

  it("oke run says since when, why and what to do; oke runs marks them and --held lists only them; oke status counts them", async () => {
    const time = createTimeTravel(Date.UTC(2026, 11, 1, 12));
    const store = createMemoryStore();
    const now = heldTrial("b");
    const consoleApp = createApp({
      modules: [{ now, fine }],
      env: "test",
      clock: time,
      store,
      config: { console: { port: 0, tokens: { alice: TOKEN } } },
    });
    stops.push(() => consoleApp.stop({ timeoutMs: 2_000 }));
    const url = (await consoleApp.start({ port: 0, host: "127.0.0.1" })).console!.url;
    const cli = (...args: string[]): Promise<Ran> => oke(...args, "--url", url, "--token", TOKEN);
    const heldId = await startedByPreviousVersion(store, time);
    await consoleApp.invoke(fine, { n: 2 });
    expect((await cli("status")).stdout).not.toContain("held back");

    time.advance(60_000);
    await until(async () => (await store.getRun(heldId))?.held !== undefined, "the run held back");
    await consoleApp.idle();

    const one = await cli("run", heldId);
    expect(one.code).toBe(0);
    expect(one.stdout.split("\n").slice(0, 4)).toEqual([
      `run ${heldId}  flow trials.held  running · held back`,
      `created 2026-12-01 12:00:00Z  updated 2026-12-01 12:01:00Z  recoveries 0`,
      `held back since 2026-12-01 12:01:00Z: OKE1301 journal: run "${heldId}" recorded step "a" at position 0, but the code now asks for step "b"`,
      `  ${MISMATCH_FIX}`,
    ]);

    const all = await cli("runs");
    expect(all.code).toBe(0);
    const rowOf = (out: string, id: string) => out.split("\n").find((l) => l.startsWith(id));
    expect(rowOf(all.stdout, heldId)).toMatch(/ running · held back .* OKE1301 journal: run /);
    expect(rowOf(all.stdout, heldId)).not.toMatch(/held back.*held back/);
    expect(all.stdout.split("\n").at(-1)).toBe(`held back (OKE1301): ${MISMATCH_FIX}`);

    const held = await cli("runs", "--held");
    expect(held.code).toBe(0);
    const lines = held.stdout.split("\n");
    expect(lines).toHaveLength(4); // the header, the run, a blank line, what to do
    expect(lines[1]!.startsWith(`${heldId}  trials.held  running · held back`)).toBe(true);
    expect(lines[3]).toBe(`held back (OKE1301): ${MISMATCH_FIX}`);

    const status = await cli("status");
    expect(status.code).toBe(0);
    expect(status.stdout.split("\n").at(-1)).toBe(
      "1 run held back (journal does not match the code): oke runs --held",
    );
  });
});

describe("instance roles in oke status", () => {
  const stops: Array<() => Promise<void>> = [];
  afterAll(async () => {
    while (stops.length > 0) await stops.pop()!();
  });

  it("the instance count says how many run each role when any runs part of the app; an older instance's heartbeat counts as all", async () => {
    const time = createTimeTravel(Date.UTC(2026, 11, 1, 12));
    const store = createMemoryStore();
    const web = createApp({
      modules: [{ fine }],
      env: "test",
      clock: time,
      store,
      role: "web",
      config: { console: { port: 0, tokens: { alice: TOKEN } } },
    });
    stops.push(() => web.stop({ timeoutMs: 2_000 }));
    const url = (await web.start({ port: 0, host: "127.0.0.1" })).console!.url;
    const cli = (...args: string[]): Promise<Ran> => oke(...args, "--url", url, "--token", TOKEN);
    const headOf = async (): Promise<string> => (await cli("status")).stdout.split("\n")[0]!;
    expect(await headOf()).toBe(
      `okengine at ${url} · env test · 1 instance alive (1 web) · 2026-12-01 12:00:00Z`,
    );
    for (let i = 0; i < 2; i++) {
      const worker = createApp({ modules: [{ fine }], env: "test", clock: time, store, role: "worker" });
      stops.push(() => worker.stop({ timeoutMs: 2_000 }));
      await worker.start({ port: 0, host: "127.0.0.1" });
    }
    expect(await headOf()).toBe(
      `okengine at ${url} · env test · 3 instances alive (1 web, 2 worker) · 2026-12-01 12:00:00Z`,
    );
    // An instance of an okengine before roles: no role in its heartbeat, so it runs everything.
    const { role: _role, ...old } = (await store.listInstances(0))[0]!;
    await store.heartbeat({ ...old, id: "old-1" }, time.now());
    expect(await headOf()).toBe(
      `okengine at ${url} · env test · 4 instances alive (1 web, 2 worker, 1 all) · 2026-12-01 12:00:00Z`,
    );
  });
});

describe("oke wake: what its line says", () => {
  const stops: Array<() => Promise<void>> = [];
  afterAll(async () => {
    while (stops.length > 0) await stops.pop()!();
  });

  it("a stranded run resumes once an instance that has its flow runs; a failed run's 404 comes with a fix that agrees with it", async () => {
    const time = createTimeTravel(Date.UTC(2026, 11, 1, 12));
    const store = createMemoryStore();
    const consoleApp = createApp({
      modules: [{ fine, broken }],
      env: "test",
      clock: time,
      store,
      config: { console: { port: 0, tokens: { alice: TOKEN } } },
    });
    stops.push(() => consoleApp.stop({ timeoutMs: 2_000 }));
    const url = (await consoleApp.start({ port: 0, host: "127.0.0.1" })).console!.url;
    const legacy = createApp({ modules: [{ legacyWait }], env: "test", clock: time, store });
    await legacy.start({ port: 0, host: "127.0.0.1" });
    await legacy.invoke(legacyWait, { n: 0 });
    await legacy.stop();
    time.advance(65_000);
    const cli = (...args: string[]): Promise<Ran> => oke(...args, "--url", url, "--token", TOKEN);
    const idsOf = async (...args: string[]): Promise<string[]> =>
      (
        JSON.parse((await cli("runs", ...args, "--json")).stdout) as { items: Array<{ id: string }> }
      ).items.map((r) => r.id);

    const [sleeper] = await idsOf("--flow", "legacy.wait");
    const woke = await cli("wake", sleeper!);
    expect([woke.code, woke.stderr]).toEqual([0, ""]);
    expect(woke.stdout).toBe(
      `woke ${sleeper}: its wake time is now, but no live instance has flow legacy.wait (stranded): it resumes once an instance that has the flow runs (deploy it again)`,
    );

    await expect(consoleApp.invoke(broken, { n: 1 })).rejects.toThrow("trip broke");
    const [failed] = await idsOf("--status", "failed");
    const refused = await cli("wake", failed!);
    expect(refused.code).toBe(1);
    // The spec's 404 text stays; the fix says what "not found" means here, without contradicting it.
    expect(refused.stderr).toBe(
      `oke: run "${failed}" not found (404 ClockResourceNotFoundError)\n` +
        `  fix: "Not found" means no sleeping run "${failed}": it exists but is failed, and only a sleeping run can be woken (oke run ${failed} shows where it is).`,
    );
  });
});

describe("oke run of a stranded sleeper, oke wake of a held-back run, oke discard --all of messages that wait", () => {
  const stops: Array<() => Promise<void>> = [];
  afterAll(async () => {
    while (stops.length > 0) await stops.pop()!();
  });

  it("oke run says a sleeper no live instance has the flow of is stranded and what to do, before and after a wake, and never suggests oke wake; a live flow's sleeper still does", async () => {
    const time = createTimeTravel(Date.UTC(2026, 11, 1, 12));
    const store = createMemoryStore();
    const consoleApp = createApp({
      modules: [{ fine, napping }],
      env: "test",
      clock: time,
      store,
      config: { console: { port: 0, tokens: { alice: TOKEN } } },
    });
    stops.push(() => consoleApp.stop({ timeoutMs: 2_000 }));
    const url = (await consoleApp.start({ port: 0, host: "127.0.0.1" })).console!.url;
    const legacy = createApp({ modules: [{ legacyWait }], env: "test", clock: time, store });
    await legacy.start({ port: 0, host: "127.0.0.1" });
    await legacy.invoke(legacyWait, { n: 0 });
    await legacy.stop();
    await consoleApp.invoke(napping, { n: 1 });
    time.advance(65_000);
    const cli = (...args: string[]): Promise<Ran> => oke(...args, "--url", url, "--token", TOKEN);
    const idOf = async (flowName: string): Promise<string> =>
      (
        JSON.parse((await cli("runs", "--flow", flowName, "--json")).stdout) as {
          items: Array<{ id: string }>;
        }
      ).items[0]!.id;

    const sleeper = await idOf("legacy.wait");
    const fix =
      "  It resumes where it stopped once an instance that has the flow runs (deploy it again). " +
      `If the flow was removed on purpose, end the run with oke terminate ${sleeper} (its undos do not run).`;
    const before = await cli("run", sleeper);
    expect(before.code).toBe(0);
    expect(before.stdout.split("\n").slice(2, 4)).toEqual([
      "sleeping on trial-end until 2026-12-01 13:00:00Z: stranded, no live instance has flow legacy.wait",
      fix,
    ]);
    expect(before.stdout).not.toContain("oke wake");

    expect((await cli("wake", sleeper)).code).toBe(0);
    const after = await cli("run", sleeper);
    expect(after.stdout.split("\n").slice(2, 4)).toEqual([
      "sleeping on trial-end, due since 2026-12-01 12:01:05Z: stranded, no live instance has flow legacy.wait",
      fix,
    ]);
    expect(after.stdout).not.toContain("oke wake");

    const napper = await idOf("trips.napping");
    expect((await cli("run", napper)).stdout.split("\n")[2]).toBe(
      `sleeping on nap until 2026-12-01 13:00:00Z  (oke wake ${napper} to wake it now)`,
    );
  });

  it("a held-back run: oke status counts it under HELD, not RUNNING; oke wake says it is held back and why, and points at oke run and oke terminate", async () => {
    const time = createTimeTravel(Date.UTC(2026, 11, 1, 12));
    const store = createMemoryStore();
    const now = heldTrial("b");
    const consoleApp = createApp({
      modules: [{ now, fine }],
      env: "test",
      clock: time,
      store,
      config: { console: { port: 0, tokens: { alice: TOKEN } } },
    });
    stops.push(() => consoleApp.stop({ timeoutMs: 2_000 }));
    const url = (await consoleApp.start({ port: 0, host: "127.0.0.1" })).console!.url;
    const cli = (...args: string[]): Promise<Ran> => oke(...args, "--url", url, "--token", TOKEN);
    const heldId = await startedByPreviousVersion(store, time);
    await consoleApp.invoke(fine, { n: 2 });
    const cols = (line: string): string[] => line.trim().split(/ {2,}/);
    const rowsOf = async (): Promise<string[][]> => {
      const lines = (await cli("status")).stdout.split("\n");
      const at = lines.findIndex((l) => l.startsWith("FLOW "));
      return lines.slice(at, at + 3).map(cols);
    };
    // Nothing held back: the table as it always was.
    expect((await rowsOf())[0]).toEqual([
      "FLOW",
      "RUNNING",
      "SLEEPING",
      "COMPENSATING",
      "COMPLETED",
      "FAILED",
    ]);

    time.advance(60_000);
    await until(async () => (await store.getRun(heldId))?.held !== undefined, "the run held back");
    await consoleApp.idle();
    const rows = await rowsOf();
    expect(rows[0]).toEqual(["FLOW", "RUNNING", "SLEEPING", "COMPENSATING", "HELD", "COMPLETED", "FAILED"]);
    expect(rows.find((r) => r[0] === "trials.held")).toEqual(["trials.held", "0", "0", "0", "1", "0", "0"]);
    expect(rows.find((r) => r[0] === "trips.fine")).toEqual(["trips.fine", "0", "0", "0", "0", "1", "0"]);

    const woke = await cli("wake", heldId);
    expect(woke.code).toBe(1);
    expect(woke.stderr).toBe(
      `oke: run "${heldId}" not found (404 ClockResourceNotFoundError)\n` +
        `  fix: "Not found" means no sleeping run "${heldId}": it exists but is held back (OKE1301): running with no holder, waiting until an instance can take it again, and only a sleeping run can be woken. ` +
        `oke run ${heldId} says why and what to do; oke terminate ${heldId} ends it (its undos do not run).`,
    );
  });

  it("discard --all of a signal whose messages are pending, not dead: says they are not dead letters, and who delivers them as oke status does; exit 0", async () => {
    const time = createTimeTravel(Date.UTC(2026, 11, 1, 12));
    const store = createMemoryStore();
    const consoleApp = createApp({
      modules: [{ fine, jobsToEmit }],
      env: "test",
      clock: time,
      store,
      config: { console: { port: 0, tokens: { alice: TOKEN } } },
    });
    stops.push(() => consoleApp.stop({ timeoutMs: 2_000 }));
    const url = (await consoleApp.start({ port: 0, host: "127.0.0.1" })).console!.url;
    // A version of the app that emitted to a signal since removed from the code (renamed): its messages stay.
    const previous = createApp({ modules: [{ goneJobs }], env: "test", clock: time, store });
    await previous.start({ port: 0, host: "127.0.0.1" });
    for (let n = 0; n < 5; n++) await previous.emit(goneJobs, { n });
    await previous.stop();
    for (let n = 0; n < 2; n++) await consoleApp.emit(jobsToEmit, { n });
    const cli = (...args: string[]): Promise<Ran> => oke(...args, "--url", url, "--token", TOKEN);

    const gone = await cli("discard", "notify.send", "--all");
    expect([gone.code, gone.stderr]).toEqual([0, ""]);
    expect(gone.stdout).toBe(
      "discarded 0 dead letters of notify.send; its 5 pending messages are not dead letters (discard removes dead letters only): " +
        "no live instance consumes this signal and this app does not declare it (removed from the code?); deploy its worker again (they wait, none is lost), " +
        "or remove what is pending with oke discard notify.send --pending --all",
    );
    const declared = await cli("discard", "legacy.jobs", "--all", "--dry-run");
    expect(declared.code).toBe(0);
    expect(declared.stdout).toBe(
      "dry run: would discard 0 dead letters of legacy.jobs; nothing changed; its 2 pending messages are not dead letters (discard removes dead letters only): " +
        "no live instance consumes this signal; deploy its worker again (they wait, none is lost), or remove what is pending with oke discard legacy.jobs --pending --all",
    );
    // The stranded line of oke status says the same of them.
    expect((await cli("status")).stdout).toContain(
      "stranded: 5 pending messages on notify.send, oldest 0ms: no live instance consumes this signal and this app does not declare it (removed from the code?); deploy its worker again (they wait, none is lost)",
    );

    // --pending removes them: a dry run first, a named id that is not pending refused, then all of them.
    const ids = (await store.pageMessages({ signal: "notify.send", status: "pending", limit: 10 })).items.map(
      (m) => m.id,
    );
    expect(ids).toHaveLength(5);
    const dry = await cli("discard", "notify.send", "--pending", "--all", "--dry-run");
    expect([dry.code, dry.stderr]).toEqual([0, ""]);
    expect(dry.stdout).toBe(
      ["dry run: would discard 5 pending messages of notify.send; nothing changed", ...ids].join("\n"),
    );
    const named = await cli("discard", "notify.send", "--pending", "m_nope");
    expect([named.code, named.stdout]).toEqual([
      1,
      "discarded 0 pending messages of notify.send\nnot pending messages of notify.send (skipped): m_nope",
    ]);
    expect(named.stderr).toBe(
      "oke: nothing discarded: m_nope is not a pending message of notify.send (oke discard notify.send --pending --all --dry-run lists them)",
    );
    const one = await cli("discard", "notify.send", "--pending", ids[0]!);
    expect([one.code, one.stdout]).toEqual([0, `discarded 1 pending message of notify.send\n${ids[0]!}`]);
    const rest = await cli("discard", "notify.send", "--pending", "--all");
    expect([rest.code, rest.stdout]).toEqual([
      0,
      ["discarded 4 pending messages of notify.send", ...ids.slice(1)].join("\n"),
    ]);
    expect(await store.stats("notify.send", time.now())).toMatchObject({ pending: 0, inflight: 0 });
    expect((await cli("status")).stdout).not.toContain("notify.send");
    // Naming ids and --all at once is a usage error, as for dead letters.
    const both = await cli("discard", "legacy.jobs", "--pending", "--all", "x");
    expect(both.code).toBe(1);
    expect(both.stderr).toContain("give message ids or --all, not both");
  });
});

describe("oke status's signal table", () => {
  it("is laid out as docs/console.md shows it: OLDEST PENDING right-aligned, its '-' too", async () => {
    const docs = readFileSync(fileURLToPath(new URL("../../docs/console.md", import.meta.url)), "utf8").split(
      "\n",
    );
    const at = docs.findIndex((l) => l.startsWith("SIGNAL  "));
    const shown = docs.slice(at, at + 6);
    const counts = (
      pending: number,
      inflight: number,
      dead: number,
      delivered: number,
      age: number | null,
    ) => ({
      pending,
      inflight,
      dead,
      delivered,
      oldestPendingAgeMs: age,
    });
    const overview = {
      env: "prod",
      now: Date.UTC(2026, 11, 1, 12, 32, 8),
      signals: [
        {
          name: "clock:ops.dlqReport",
          delivery: "once",
          schedule: "ops.dlqReport",
          flows: ["ops.dlqReport"],
          ...counts(0, 0, 0, 3, null),
          throughput: { delivered: [0] },
        },
        {
          name: "email.send",
          delivery: "once",
          flows: ["x"],
          ...counts(12, 4, 2, 310, 65_000),
          throughput: { delivered: [90, 6] },
        },
        {
          name: "orders.placed",
          delivery: "broadcast",
          flows: ["orders.charge", "orders.ship"],
          throughput: { delivered: [40] },
          copies: [
            { flow: "orders.charge", queue: "q1", ...counts(0, 0, 0, 20, null) },
            { flow: "orders.ship", queue: "q2", ...counts(0, 0, 0, 20, null) },
          ],
        },
      ],
      flows: [],
      recentFailures: { deadLetters: [], runs: [] },
      instances: 2,
    };
    const server = createServer((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify(overview));
    });
    const url = await listen(server);
    try {
      const r = await oke("status", "--url", url, "--token", TOKEN);
      expect(r.code).toBe(0);
      const lines = r.stdout.split("\n");
      expect(lines.slice(2, 8)).toEqual(shown);
      // The last column counts deliveries only, and says so.
      expect(lines[2]).toMatch(/ DELIVERED 10 MIN$/);
    } finally {
      await close(server);
    }
  });
});
