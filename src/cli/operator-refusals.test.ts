// The oke operator commands on what an audit found: empty arguments and cursors refused before any request, replay with no live consumer, wake into a hold, proxies and 501s, unknown subcommands, table widths.
import { spawn } from "node:child_process";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { createApp } from "../app/app.ts";
import { flow, on, signal } from "../index.ts";
import { createMemoryStore } from "../store/memory/memory-store.ts";
import { MISMATCH_FIX } from "../durable/mismatch-log.ts";
import { withoutVitestEnv } from "../../test/support/built-oke.ts";
import { oke, type Ran } from "./run-oke.test-helper.ts";
import { displayWidth, short, table } from "./table.ts";

const TOKEN = "alice-secret-0123456789";

const servers: Server[] = [];
afterAll(async () => {
  for (const s of servers) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
});

/** A server in place of a Console: it answers with `handler` and records every request. */
async function serve(
  handler: (req: IncomingMessage, res: ServerResponse) => void,
): Promise<{ url: string; seen: string[] }> {
  const seen: string[] = [];
  const s = createServer((req, res) => {
    seen.push(`${req.method} ${req.url}`);
    handler(req, res);
  });
  servers.push(s);
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  return { url: `http://127.0.0.1:${(s.address() as AddressInfo).port}`, seen };
}

const json = (res: ServerResponse, status: number, body: unknown): void => {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(body));
};

describe("malformed commands are refused before any request (exit 1)", () => {
  it("an empty argument, filter, cursor or --url; a rate that is not decimal; a --since that is no time", async () => {
    const { url, seen } = await serve((_req, res) => json(res, 200, { items: [], next: null }));
    const cli = (...args: string[]): Promise<Ran> => oke(...args, "--url", url, "--token", TOKEN);
    const cases: Array<[string[], string]> = [
      [["run", ""], "oke: <runId> is empty: oke runs lists the runs"],
      [["wake", ""], "oke: <runId> is empty: oke runs lists the runs"],
      [["terminate", ""], "oke: <runId> is empty: oke runs lists the runs"],
      [["dead", ""], "oke: <signal> is empty: oke status lists the signals"],
      [["replay", "", "--all"], "oke: <signal> is empty: oke status lists the signals"],
      [["replay", "jobs.x", "m_1", ""], "oke: <ids> is empty: oke dead <signal> lists the dead letters"],
      [["discard", "jobs.x", ""], "oke: <ids> is empty: oke dead <signal> lists the dead letters"],
      [["replays", "stop", ""], "oke: <job> is empty: oke replays lists the jobs"],
      [["schedules", "pause", ""], "oke: <name> is empty: oke schedules lists them"],
      [["schedules", "trigger", ""], "oke: <name> is empty: oke schedules lists them"],
      [["schedules", "edit", "", "--every", "1h"], "oke: <name> is empty: oke schedules lists them"],
      [["schedules", "edit", "x", "--cron", ""], 'oke: --cron is empty: give a cron, e.g. "0 7 * * *"'],
      [
        ["runs", "--flow", ""],
        "oke: --flow is empty: name a flow, or leave --flow out to list runs of every flow",
      ],
      [["runs", "--label", ""], "oke: --label is empty: name a sleep label, or leave --label out"],
      [["runs", "--parent", ""], "oke: --parent is empty: name the parent run, or leave --parent out"],
      [
        ["runs", "--cursor", ""],
        "oke: --cursor is empty: pass the next of a previous page (its more: line prints it), or leave --cursor out for the first page",
      ],
      [
        ["dead", "jobs.x", "--cursor", ""],
        "oke: --cursor is empty: pass the next of a previous page (its more: line prints it), or leave --cursor out for the first page",
      ],
    ];
    for (const [args, stderr] of cases) {
      const r = await cli(...args);
      expect([args, r.code, r.stdout, r.stderr]).toEqual([args, 1, "", stderr]);
    }
    // Commander's own refusals of a bad value: exit 1, the reason on stderr.
    for (const [args, reason] of [
      [["replay", "jobs.x", "--all", "--rate", "0x10"], "expected messages per second"],
      [["replay", "jobs.x", "--all", "--rate", "1e3"], "expected messages per second"],
      [["runs", "--since", "-5"], "expected epoch ms (e.g. 1764590400000) or an ISO date"],
      [["runs", "--since", "yesterday"], "expected epoch ms (e.g. 1764590400000) or an ISO date"],
    ] as Array<[string[], string]>) {
      const r = await cli(...args);
      expect([args, r.code, r.stderr.includes(reason)]).toEqual([args, 1, true]);
    }
    expect(seen).toEqual([]);
    // A valid --since still passes (an ISO date, epoch ms).
    expect((await cli("runs", "--since", "2026-12-01")).code).toBe(0);
    expect((await cli("runs", "--since", "1764590400000")).code).toBe(0);

    // --url "" is refused, not read as the default address (another app may listen there).
    const empty = await oke("status", "--url", "", "--token", TOKEN);
    expect([empty.code, empty.stdout, empty.stderr]).toEqual([
      1,
      "",
      "oke: --url is empty: give the Console's address (e.g. http://127.0.0.1:6533), or leave --url out for that default",
    ]);
    // A malformed URL is a malformed command too: exit 1, not 2 (unreachable).
    const bad = await oke("status", "--url", "ftp://x", "--token", TOKEN);
    expect([bad.code, bad.stderr]).toEqual([
      1,
      'oke: the Console URL must be http:// or https://, got "ftp://x"',
    ]);
  });

  it("OKE_CONSOLE_URL set but empty is refused, naming the variable (bin/oke.js)", async () => {
    const repo = fileURLToPath(new URL("../../", import.meta.url));
    const child = spawn(process.execPath, [`${repo}bin/oke.js`, "status"], {
      cwd: repo,
      env: { ...withoutVitestEnv(process.env), OKE_CONSOLE_URL: "", OKE_CONSOLE_TOKEN: TOKEN },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stderr = "";
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    const code = await new Promise<number | null>((r) => child.on("close", r));
    expect([code, stderr]).toEqual([
      1,
      "oke: OKE_CONSOLE_URL is set but empty: set it to the Console's address (e.g. http://127.0.0.1:6533), or unset it for that default\n",
    ]);
  }, 60_000);

  it("an unknown subcommand of schedules or replays is named, with the ones there are", async () => {
    const { url, seen } = await serve((_req, res) => json(res, 200, { schedules: [], jobs: [] }));
    const s = await oke("schedules", "frobnicate", "--url", url, "--token", TOKEN);
    expect([s.code, s.stdout, s.stderr]).toEqual([
      1,
      "",
      'oke: unknown subcommand "frobnicate" for oke schedules: pause, resume, reset, trigger, edit (oke schedules alone lists them)',
    ]);
    const r = await oke("replays", "frobnicate", "--url", url, "--token", TOKEN);
    expect([r.code, r.stderr]).toEqual([
      1,
      'oke: unknown subcommand "frobnicate" for oke replays: stop (oke replays alone lists them)',
    ]);
    expect(seen).toEqual([]);
    // The subcommands and the lists themselves are unchanged.
    expect((await oke("schedules", "--url", url, "--token", TOKEN)).stdout).toBe("no schedules");
  });
});

describe("what answers other than a Console's mean", () => {
  it("a proxy's 502/503/504 says the app behind it is unreachable (exit 2), not that it is no Console", async () => {
    for (const status of [502, 503, 504]) {
      const { url } = await serve((_req, res) => {
        res.writeHead(status, { "content-type": "text/html" });
        res.end("<html><body>Bad Gateway</body></html>");
      });
      const r = await oke("status", "--url", url, "--token", TOKEN);
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(
        new RegExp(
          `^oke: the Console at ${url} cannot be reached: what answered is in front of it \\(a proxy or load balancer\\?\\) and said ${status} .+: the app behind it is down or unreachable$`,
        ),
      );
    }
  });

  it("a documented 501 (the store cannot do it) is said as it is, not as a Console that could not answer", async () => {
    const message =
      'console: the app\'s store (driver "custom") cannot terminate runs: it has no terminateRun';
    const { url } = await serve((_req, res) => json(res, 501, { error: { code: "OKE1612", message } }));
    const r = await oke("terminate", "r_1", "--url", url, "--token", TOKEN);
    expect([r.code, r.stderr]).toEqual([
      1,
      'oke: the app\'s store (driver "custom") cannot terminate runs: it has no terminateRun (501 OKE1612)',
    ]);
  });
});

describe("oke wake of a run held back as it resumes", () => {
  it("reads the run once after 'resumed': held back, it says why and what to do, exit 1; else exit 0 as before", async () => {
    let held = true;
    const run = {
      id: "r_1",
      flow: "trials.held",
      status: "running",
      createdAt: Date.UTC(2026, 11, 1),
      updatedAt: Date.UTC(2026, 11, 1),
      wakeAt: null,
    };
    const { url, seen } = await serve((req, res) => {
      if (req.method === "POST") return json(res, 200, { outcome: "resumed", runId: "r_1" });
      json(res, 200, {
        run: held
          ? {
              ...run,
              held: {
                code: "OKE1301",
                message: 'journal mismatch at seq 0: the code asks for step "b", the journal has step "a"',
                since: Date.UTC(2026, 11, 1),
              },
            }
          : run,
        timeline: [],
        sleepingOn: null,
        ancestors: [],
        children: [],
        heldFix: MISMATCH_FIX,
      });
    });
    const r = await oke("wake", "r_1", "--url", url, "--token", TOKEN);
    expect([r.code, r.stdout]).toEqual([1, "woke r_1: resumed"]);
    expect(r.stderr).toBe(
      'oke: run r_1 was resumed, then held back (OKE1301): journal mismatch at seq 0: the code asks for step "b", the journal has step "a"\n' +
        `  fix: ${MISMATCH_FIX}`,
    );
    expect(seen).toEqual(["POST /api/runs/r_1/wake", "GET /api/runs/r_1"]);
    // --json: the answer alone on stdout, the hold on stderr, the same exit code.
    const j = await oke("wake", "r_1", "--json", "--url", url, "--token", TOKEN);
    expect([j.code, JSON.parse(j.stdout)]).toEqual([1, { outcome: "resumed", runId: "r_1" }]);
    held = false;
    const ok = await oke("wake", "r_1", "--url", url, "--token", TOKEN);
    expect([ok.code, ok.stdout, ok.stderr]).toEqual([0, "woke r_1: resumed", ""]);
  });
});

// A previous version consumed legacy.jobs with a worker that fails; this one emits it and has no worker.
const oldJobs = signal.once<{ n: number }>("legacy.jobs", { retries: 0 });
const oldWorker = on(
  oldJobs,
  flow("legacy.failWork", {
    do: () => {
      throw new Error("old worker broke");
    },
  }),
);
const jobsLeft = signal.once<{ n: number }>("legacy.jobs", { retries: 0, optional: true });

describe("oke replay of a signal no live instance consumes", () => {
  const stops: Array<() => Promise<void>> = [];
  afterAll(async () => {
    while (stops.length > 0) await stops.pop()!();
  });

  it("says the replayed messages wait pending until its worker is deployed again (dry run, replay, paced); exit 0", async () => {
    const store = createMemoryStore();
    const previous = createApp({ modules: [{ oldWorker }], env: "test", store });
    await previous.start({ port: 0, host: "127.0.0.1" });
    for (let n = 0; n < 3; n++) await previous.emit(oldJobs, { n });
    await previous.idle();
    await previous.stop();
    const consoleApp = createApp({
      modules: [{ jobsLeft }],
      env: "test",
      store,
      config: { console: { port: 0, tokens: { alice: TOKEN } } },
    });
    stops.push(() => consoleApp.stop({ timeoutMs: 2_000 }));
    const url = (await consoleApp.start({ port: 0, host: "127.0.0.1" })).console!.url;
    const cli = (...args: string[]): Promise<Ran> => oke(...args, "--url", url, "--token", TOKEN);
    const dead = (await store.pageMessages({ signal: "legacy.jobs", status: "dead", limit: 10 })).items.map(
      (m) => m.id,
    );
    expect(dead).toHaveLength(3);

    const dry = await cli("replay", "legacy.jobs", "--all", "--dry-run");
    expect([dry.code, dry.stderr]).toEqual([0, ""]);
    expect(dry.stdout).toBe(
      [
        "dry run: would replay 3 dead letters of legacy.jobs; nothing changed; no live instance consumes this signal: they would wait pending until its worker is deployed again (none is lost)",
        ...dead,
      ].join("\n"),
    );
    const one = await cli("replay", "legacy.jobs", dead[0]!);
    expect([one.code, one.stderr]).toEqual([0, ""]);
    expect(one.stdout).toBe(
      `replayed 1 dead letter of legacy.jobs; no live instance consumes this signal: it waits pending until its worker is deployed again (it is not lost)\n${dead[0]!}`,
    );
    // The API's answer carries it, as a discard's does.
    const json = await cli("replay", "legacy.jobs", "--all", "--dry-run", "--json");
    expect(JSON.parse(json.stdout)).toMatchObject({
      backlog: { pending: 1, inflight: 0, liveConsumer: false, declared: true },
    });
    const paced = await cli("replay", "legacy.jobs", "--all", "--rate", "0.001");
    expect([paced.code, paced.stderr]).toEqual([0, ""]);
    expect(paced.stdout).toMatch(
      /^replaying 2 dead letters of legacy\.jobs at 0\.001\/s in the background \(job \d+\); no live instance consumes this signal: they wait pending until its worker is deployed again \(none is lost\)$/,
    );
    // The job stopped by the command that lists them; an unknown one names that command, not the API path.
    const job = /\(job (\d+)\)/.exec(paced.stdout)![1]!;
    expect((await cli("replays", "stop", job)).code).toBe(0);
    const unknown = await cli("replays", "stop", "999");
    expect([unknown.code, unknown.stderr]).toEqual([
      1,
      'oke: no replay job "999" (oke replays lists them) (404 OKE1606)',
    ]);
  });
});

describe("tables and previews measure terminal columns", () => {
  it("pads CJK and emoji cells by their width, so the columns line up", () => {
    const out = table(
      ["SIGNAL", "PENDING", "NOTE"],
      [
        ["東京.jobs", 1, "x"],
        ["jobs.📦", 22, "y"],
        ["plain", 3, "z"],
      ],
    ).split("\n");
    // Every row's NOTE starts at the same column.
    const noteAt = out.map((l) => displayWidth(l.slice(0, l.lastIndexOf(" ") + 1)));
    expect(new Set(noteAt).size).toBe(1);
    expect(out[1]).toBe("東京.jobs        1  x");
    expect(out[2]).toBe("jobs.📦         22  y");
  });

  it("short() cuts between characters, never inside a surrogate pair or an emoji sequence", () => {
    expect(short("ab😀cd", 4)).toBe("ab…");
    expect(short("ab😀cd", 5)).toBe("ab😀…");
    expect(short("👍🏽👍🏽👍🏽", 5)).toBe("👍🏽👍🏽…");
    expect(short("東京東京東京", 6)).toBe("東京…");
    expect(short("a".repeat(70))).toBe(`${"a".repeat(59)}…`);
    expect(short("no cut")).toBe("no cut");
    expect(short("ab😀cd", 4)!.includes("\uFFFD")).toBe(false);
  });
});
