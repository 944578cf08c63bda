// The oke operator commands against a real `oke start` process (memory, file and PostgreSQL drivers) over its Console: status, dead, replay, discard, runs, run, wake, schedules, --json, refusals; in this process, and a few through the compiled binary.
import { spawn, type ChildProcess } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TEST_DATABASE_URL } from "../../test/conformance/drivers.ts";
import { builtOke, withoutVitestEnv } from "../../test/support/built-oke.ts";
import { freePort } from "../../test/support/free-port.ts";
import { oke as okeInProcess } from "./run-oke.test-helper.ts";

const REPO = fileURLToPath(new URL("../../", import.meta.url));
/**
 * The CLI compiled once (test/support/built-oke.ts), for the commands run through the binary and
 * for the apps (`oke start`): from the sources each would compile okengine through tsx first.
 */
let BIN = "";
beforeAll(async () => {
  BIN = await builtOke();
});
const FIXTURE = fileURLToPath(new URL("./fixtures/ops", import.meta.url));
const TOKEN = "ops-operator-token-0123456789";

interface Ran {
  /** A number, or null when the binary died of a signal, or "threw" when an error escaped the command in this process. */
  code: number | string | null;
  stdout: string;
  stderr: string;
}

/** The environment without anything of this machine's that would change what `oke` does. */
function cleanEnv(): Record<string, string | undefined> {
  const env = withoutVitestEnv(process.env);
  for (const k of Object.keys(env))
    if (k.startsWith("OKE_") || k === "DATABASE_URL" || k === "NODE_ENV" || k === "PORT") delete env[k];
  return env;
}

/** The connection as an operator exports it. */
type Conn = { OKE_CONSOLE_URL?: string; OKE_CONSOLE_TOKEN?: string };

/**
 * One `oke` command run to its end. In this process (run-oke.test-helper.ts: the same commander
 * program, no Node start) with `conn` passed as --url / --token; or, with `binary`, through the
 * compiled bin with `conn` in its environment: argv, the environment's defaults, the exit code and
 * stdout of the real process. A process start costs ~0.35 s of CPU, so the binary runs only where a
 * case says so, on one driver (the commands' side is the same on every driver: HTTP to the Console).
 */
async function oke(args: string[], conn: Conn = {}, binary = false): Promise<Ran> {
  if (binary) return spawnOke(args, conn);
  const flags: string[] = [];
  if (conn.OKE_CONSOLE_URL !== undefined) flags.push("--url", conn.OKE_CONSOLE_URL);
  if (conn.OKE_CONSOLE_TOKEN !== undefined) flags.push("--token", conn.OKE_CONSOLE_TOKEN);
  return okeInProcess(...args, ...flags);
}

function spawnOke(args: string[], env: Record<string, string | undefined>): Promise<Ran> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      cwd: REPO,
      env: { ...cleanEnv(), ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

async function until(check: () => boolean | Promise<boolean>, what: string, limitMs = 20_000): Promise<void> {
  const end = Date.now() + limitMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** A running `oke start` of the ops fixture, copied to a temp dir (its .oke/ and logs land there). */
class App {
  readonly lines: string[] = [];
  proc!: ChildProcess;
  appUrl = "";
  consoleUrl = "";

  constructor(
    readonly dir: string,
    readonly env: Record<string, string>,
    /** Expect the Console to start (its boot line names its address). */
    readonly withConsole = true,
  ) {}

  async start(): Promise<void> {
    this.proc = spawn(process.execPath, [BIN, "start", this.dir, "--port", "0"], {
      cwd: REPO,
      env: { ...cleanEnv(), ...this.env, OPS_FIXTURE_DIR: this.dir },
      stdio: ["ignore", "pipe", "pipe"],
    });
    for (const s of [this.proc.stdout!, this.proc.stderr!])
      createInterface({ input: s }).on("line", (l) => this.lines.push(l));
    await until(
      () => this.lines.some((l) => l.startsWith("okengine listening on ")) || this.proc.exitCode !== null,
      "the app to listen",
      60_000,
    );
    const listening = this.lines.find((l) => l.startsWith("okengine listening on "));
    if (!listening) throw new Error(`oke start failed:\n${this.lines.join("\n")}`);
    this.appUrl = /(http:\/\/\S+)/.exec(listening)![1]!;
    if (!this.withConsole) return;
    // The log's lines are written asynchronously: the Console's may come after "listening".
    await until(
      () => this.lines.some((l) => l.includes("okengine console on ")) || this.proc.exitCode !== null,
      "the Console's boot line",
    ).catch(() => undefined);
    const consoleLine = this.lines.find((l) => l.includes("okengine console on "));
    if (!consoleLine) throw new Error(`no Console:\n${this.lines.join("\n")}`);
    this.consoleUrl = /okengine console on (http:\/\/[^\s"]+)/.exec(consoleLine)![1]!;
  }

  async post(path: string, body: unknown): Promise<number> {
    const res = await fetch(this.appUrl + path, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    await res.arrayBuffer();
    return res.status;
  }

  /** The Console API straight (to check what the commands did). */
  async api<T>(path: string): Promise<T> {
    const res = await fetch(this.consoleUrl + path, { headers: { authorization: `Bearer ${TOKEN}` } });
    return (await res.json()) as T;
  }

  read(file: string): string[] {
    const p = join(this.dir, file);
    return existsSync(p) ? readFileSync(p, "utf8").split("\n").filter(Boolean) : [];
  }

  async stop(): Promise<void> {
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) return;
    const exited = new Promise((r) => this.proc.once("close", r));
    this.proc.kill("SIGTERM");
    const timer = setTimeout(() => this.proc.kill("SIGKILL"), 15_000);
    await exited;
    clearTimeout(timer);
  }
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- JSON output is checked field by field
type Json = any;

const drivers = [
  { name: "memory", env: (): Record<string, string> => ({ OKE_JOURNAL: "memory" }) },
  { name: "file", env: (): Record<string, string> => ({ OKE_JOURNAL: "file" }) },
  {
    name: "postgres",
    env: (): Record<string, string> => ({
      OKE_JOURNAL: "postgres",
      DATABASE_URL: TEST_DATABASE_URL,
      OPS_FIXTURE_SCHEMA: `ops_cli_${process.pid}_${Date.now().toString(36)}`,
    }),
  },
];

// The three drivers' suites run side by side, and beside the production one: each has its own app
// process, temp dir, ports and schema, and most of the time is spent waiting on the apps. Inside a
// driver's suite the cases run in order (it.sequential), each on what the one before left. The
// commands run in this process; on the file driver, those run with `bin(…)` or `binary` go through
// the compiled bin instead (one or more per command family: status, dead, replay, discard, runs,
// run, wake, schedules), checked by the same assertions.
describe.each(drivers)(
  "oke operator commands against `oke start` on the $name driver",
  { timeout: 150_000, concurrent: true },
  (driver) => {
    let app: App;
    let dir: string;
    let env: Record<string, string>;
    /** The commands' own connection settings (env, as an operator would export them). */
    let conn: Conn;
    /** On this driver, the commands marked so run through the compiled bin. */
    const binary = driver.name === "file";
    const run = (...args: string[]): Promise<Ran> => oke(args, conn);
    /** A command through the compiled bin on the binary's driver, in this process on the others. */
    const bin = (...args: string[]): Promise<Ran> => oke(args, conn, binary);
    const json = async (...args: string[]): Promise<Json> => {
      const r = await run(...args, "--json");
      expect(r.stderr).toBe("");
      expect(r.code).toBe(0);
      return JSON.parse(r.stdout);
    };

    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), "oke-ops-"));
      cpSync(FIXTURE, dir, { recursive: true });
      rmSync(join(dir, "tsconfig.json"));
      symlinkSync(join(REPO, "node_modules"), join(dir, "node_modules"));
      env = { ...driver.env(), OKE_CONSOLE_PORT: "0", OKE_CONSOLE_TOKEN: TOKEN };
      app = new App(dir, env);
      await app.start();
      conn = { OKE_CONSOLE_URL: app.consoleUrl, OKE_CONSOLE_TOKEN: TOKEN };
    }, 90_000);

    afterAll(async () => {
      await app?.stop();
      if (env?.OPS_FIXTURE_SCHEMA) {
        const c = new pg.Client({ connectionString: TEST_DATABASE_URL });
        await c.connect();
        try {
          await c.query(`DROP SCHEMA IF EXISTS "${env.OPS_FIXTURE_SCHEMA}" CASCADE`);
        } finally {
          await c.end();
        }
      }
      if (dir) rmSync(dir, { recursive: true, force: true });
    }, 30_000);

    it.sequential(
      "refuses without a token or with a wrong one (exit 1), and says plainly when the Console cannot be reached (exit 2)",
      async () => {
        // Nothing is dead yet: a refused replay has nothing it could change under the other three.
        const [none, wrong, mutating, away, appPort] = await Promise.all([
          oke(["status"], { OKE_CONSOLE_URL: app.consoleUrl }, binary),
          oke(["status", "--url", app.consoleUrl, "--token", "not-the-operator-token"]),
          oke(["replay", "jobs.run", "--all"], { OKE_CONSOLE_URL: app.consoleUrl }),
          // The app's own port is not the Console: nothing listens on port 1.
          oke(["status", "--url", "http://127.0.0.1:1", "--token", TOKEN], {}, binary),
          // The app's HTTP port answers JSON too (its 404 OKE1404), but is not the Console.
          oke(["status", "--url", app.appUrl, "--token", TOKEN]),
        ]);
        expect(none.code).toBe(1);
        expect(none.stdout).toBe("");
        expect(none.stderr).toContain("401 OKE1601");
        expect(none.stderr).toContain("--token");
        expect(wrong.code).toBe(1);
        expect(wrong.stderr).toContain("401 OKE1602");
        // A mutating command without a token changes nothing either.
        expect(mutating.code).toBe(1);
        expect(away.code).toBe(2);
        expect(away.stderr).toContain("cannot reach the Console at http://127.0.0.1:1");
        // Not a refused connection (fetch refuses port 1 itself, "bad port"): no hint about what listens.
        expect(away.stderr).not.toContain("hint:");
        expect(appPort.code).toBe(2);
        expect(appPort.stdout).toBe("");
        expect(appPort.stderr).toContain(`oke: ${app.appUrl} is not a Console`);
        expect(appPort.stderr).toContain("(OKE1404)");
        expect(appPort.stderr).toContain(
          "is --url the Console port, 6533 by default, rather than the app's?",
        );
      },
    );

    it.sequential(
      "status shows each signal with its counts, broadcast copies under their signal, and flows with their runs",
      async () => {
        expect(await app.post("/emit", { n: 1 })).toBe(200);
        expect(await app.post("/emit", { n: 2, fail: true })).toBe(200);
        expect(await app.post("/emit", { n: 3, fail: true })).toBe(200);
        expect(await app.post("/place", { id: "o1" })).toBe(200);
        // Waits read the Console API straight (what --json prints); the checks below go through the commands.
        await until(async () => {
          const o = await app.api<Json>("/api/overview");
          const jobs = o.signals.find((s: Json) => s.name === "jobs.run");
          const placed = o.signals.find((s: Json) => s.name === "orders.placed");
          return (
            jobs.dead === 2 && jobs.delivered === 1 && placed.copies.every((c: Json) => c.delivered === 1)
          );
        }, "two dead letters, one delivery, both broadcast copies delivered");
        const [o, text] = await Promise.all([json("status"), bin("status")]);
        expect(o.env).toBe("prod");
        // Broadcast copies are never signals of their own; they hang under the signal they copy.
        expect(o.signals.map((s: Json) => s.name).filter((n: string) => n.startsWith("~"))).toEqual([]);
        expect(o.signals.find((s: Json) => s.name === "orders.placed").copies).toEqual([
          expect.objectContaining({ flow: "orders.charge", queue: "~broadcast:orders.placed:orders.charge" }),
          expect.objectContaining({ flow: "orders.ship", queue: "~broadcast:orders.placed:orders.ship" }),
        ]);
        expect(text.code).toBe(0);
        const lines = text.stdout.split("\n");
        expect(lines[0]).toContain(`okengine at ${app.consoleUrl} · env prod · 1 instance alive`);
        expect(lines.find((l) => l.startsWith("jobs.run "))!.split(/\s+/)).toEqual([
          "jobs.run",
          "once",
          "0",
          "0",
          "2",
          "1",
          "-",
          "1",
        ]);
        expect(lines.find((l) => l.startsWith("orders.placed "))).toMatch(/^orders\.placed\s+broadcast\s/);
        expect(lines.some((l) => /^\s+↳ copies for orders\.charge\s+copies\s+0\s+0\s+0\s+1\b/.test(l))).toBe(
          true,
        );
        expect(lines.some((l) => l.includes("~broadcast"))).toBe(false);
        expect(lines.find((l) => l.startsWith("clock:reports.nightly "))).toMatch(/\sclock\s/);
        expect(text.stdout).toContain("2 dead letters on jobs.run: oke dead jobs.run");
      },
    );

    it.sequential("dead lists the dead letters with their failure history", async () => {
      const [page, text, one, unknown] = await Promise.all([
        json("dead", "jobs.run"),
        bin("dead", "jobs.run"),
        json("dead", "jobs.run", "--limit", "1"),
        run("dead", "no.such.signal"),
      ]);
      expect(page.items.map((m: Json) => m.payload)).toEqual([
        { n: 2, fail: true },
        { n: 3, fail: true },
      ]);
      for (const m of page.items)
        expect(m.failures).toEqual([
          expect.objectContaining({ attempt: 1, code: "E_JOB" }),
          expect.objectContaining({ attempt: 2, code: "E_JOB" }),
        ]);
      expect(text.code).toBe(0);
      for (const m of page.items) expect(text.stdout).toContain(`${m.id}  attempts 2`);
      expect(text.stdout).toMatch(/attempt 1 {2}\S+ \S+ {2}E_JOB {2}job 2 broke/);
      expect(text.stdout).toMatch(/attempt 2 {2}\S+ \S+ {2}E_JOB {2}job 3 broke/);
      expect(one.items).toHaveLength(1);
      expect(typeof one.next).toBe("string");
      expect(unknown.code).toBe(1);
      expect(unknown.stderr).toContain("404 OKE1606");
    });

    it.sequential(
      "replay --dry-run names what would go and changes nothing; replay delivers the message exactly once more, keeping its history",
      async () => {
        const [two, three] = (await json("dead", "jobs.run")).items.map((m: Json) => m.id as string);
        const [dry, dryOne] = await Promise.all([
          run("replay", "jobs.run", "--all", "--dry-run"),
          json("replay", "jobs.run", two, "--dry-run"),
        ]);
        expect(dry.code).toBe(0);
        expect(dry.stdout).toContain("dry run: would replay 2 dead letters of jobs.run; nothing changed");
        expect(dry.stdout).toContain(two);
        expect(dryOne.wouldReplay).toEqual([two]);
        // After both dry runs: still two dead letters, nothing delivered again.
        expect((await json("status")).signals.find((s: Json) => s.name === "jobs.run").dead).toBe(2);
        expect(app.read("delivered.log")).toEqual(["1"]);

        const neither = await run("replay", "jobs.run");
        expect(neither.code).toBe(1);
        expect(neither.stderr).toContain("or pass --all");

        writeFileSync(join(dir, "fixed"), ""); // the handler succeeds from now on
        const rep = await bin("replay", "jobs.run", two, "m_not_dead");
        expect(rep.code).toBe(0);
        expect(rep.stdout).toContain("replayed 1 dead letter of jobs.run");
        expect(rep.stdout).toContain("skipped): m_not_dead");
        await until(() => app.read("delivered.log").includes("2"), "job 2 delivered");
        // The handler writes the log before its outcome is settled (settles are batched): wait for
        // the settle, whichever it is, then check it.
        await until(
          async () => (await app.api<Json>(`/api/messages/${two}`)).status !== "inflight",
          "job 2 settled",
        );
        const msg = await app.api<Json>(`/api/messages/${two}`);
        expect(msg.status).toBe("delivered");
        expect(msg.failures).toHaveLength(2); // history kept
        // Once more, exactly: a second replay finds nothing dead to replay, and exits 1 to say so.
        const again = await run("replay", "jobs.run", two, "--json");
        expect(again.code).toBe(1);
        expect(JSON.parse(again.stdout).replayed).toEqual([]);
        expect(again.stderr).toContain(`nothing replayed: ${two} is not a dead letter of jobs.run`);
        const [status, dead] = await Promise.all([json("status"), json("dead", "jobs.run")]);
        const s = status.signals.find((x: Json) => x.name === "jobs.run");
        expect(s).toMatchObject({ dead: 1, delivered: 2, pending: 0, inflight: 0 });
        expect(app.read("delivered.log")).toEqual(["1", "2"]);
        expect(dead.items.map((m: Json) => m.id)).toEqual([three]);
      },
    );

    it.sequential("discard --dry-run changes nothing; discard removes the dead letter", async () => {
      const [three] = (await json("dead", "jobs.run")).items.map((m: Json) => m.id as string);
      expect((await json("discard", "jobs.run", "--all", "--dry-run")).wouldDiscard).toEqual([three]);
      expect((await json("dead", "jobs.run")).items).toHaveLength(1);
      const d = await bin("discard", "jobs.run", "--all");
      expect(d.code).toBe(0);
      expect(d.stdout).toContain(`discarded 1 dead letter of jobs.run\n${three}`);
      const [afterJson, afterText] = await Promise.all([json("dead", "jobs.run"), run("dead", "jobs.run")]);
      expect(afterJson.items).toEqual([]);
      expect(afterText.stdout).toContain("no dead letters on jobs.run");
      expect(app.read("delivered.log")).toEqual(["1", "2"]);
      // A paced replay (--rate) runs in the background: a poison message goes dead again, its history growing.
      expect(await app.post("/emit", { n: 9, fail: "always" })).toBe(200);
      await until(
        async () => (await app.api<Json>("/api/signals/jobs.run/dead")).items.length === 1,
        "the poison message dead",
      );
      const [poison] = (await json("dead", "jobs.run")).items.map((m: Json) => m.id as string);
      const paced = await run("replay", "jobs.run", "--all", "--rate", "50");
      expect(paced.code).toBe(0);
      expect(paced.stdout).toMatch(
        /^replaying 1 dead letter of jobs\.run at 50\/s in the background \(job \S+\)/,
      );
      await until(
        async () => (await app.api<Json>(`/api/messages/${poison}`)).failures.length === 4,
        "the replayed poison message failed twice more",
      );
      expect((await app.api<Json>(`/api/messages/${poison}`)).status).toBe("dead");
      expect((await json("discard", "jobs.run", poison)).discarded).toEqual([poison]);

      // A slow paced replay is listed by oke replays and ended by oke replays stop.
      for (const n of [91, 92]) expect(await app.post("/emit", { n, fail: "always" })).toBe(200);
      await until(
        async () => (await app.api<Json>("/api/signals/jobs.run/dead")).items.length === 2,
        "two poison messages dead",
      );
      const slow = await json("replay", "jobs.run", "--all", "--rate", "0.001");
      const jobId = String(slow.job.id);
      await until(
        async () =>
          (await app.api<Json>("/api/replays")).jobs.find((j: Json) => String(j.id) === jobId).replayed === 1,
        "the first batch of the slow replay",
      );
      const listed = await run("replays");
      expect(listed.stdout.split("\n")[0]).toMatch(
        /^JOB\s+SIGNAL\s+RATE\/S\s+REPLAYED\s+SKIPPED\s+STATE\s+NEXT BATCH\s+BY$/,
      );
      expect(listed.stdout).toMatch(
        new RegExp(`^\\s*${jobId}\\s+jobs\\.run\\s+0\\.001\\s+1 of 2\\s+0\\s+running\\s`, "m"),
      );
      const stopped = await run("replays", "stop", jobId);
      expect([stopped.code, stopped.stdout]).toEqual([
        0,
        `stopped replay job ${jobId} of jobs.run: 1 of 2 replayed`,
      ]);
      expect((await run("replays", "stop", jobId)).stdout).toBe(
        `replay job ${jobId} of jobs.run had already ended (stopped): 1 of 2 replayed`,
      );
      const unknown = await run("replays", "stop", "999999");
      expect(unknown.code).toBe(1);
      expect(unknown.stderr).toContain('no replay job "999999"');
      await until(
        async () => (await app.api<Json>("/api/signals/jobs.run/dead")).items.length === 2,
        "the replayed one dead again",
      );
      expect((await json("discard", "jobs.run", "--all")).count).toBe(2);

      // Every action above is in the audit log under the token's label.
      const audit = await app.api<Json>("/api/audit?limit=20");
      expect(audit.items.every((a: Json) => a.actor === "operator")).toBe(true);
      expect(audit.items.map((a: Json) => a.action)).toContain("discard");
    });

    it.sequential(
      "runs filters by status and flow; run shows the timeline; wake completes a sleeping run early",
      async () => {
        expect(await app.post("/trip", { id: "t1" })).toBe(204);
        await until(
          async () => (await app.api<Json>("/api/runs?status=sleeping")).items.length === 1,
          "a sleeping run",
        );
        const [r] = (await json("runs", "--status", "sleeping")).items;
        expect(r).toMatchObject({ flow: "trips.book", status: "sleeping", sleepingOn: "wait-for-payment" });
        // All reads of the sleeping run: side by side.
        const [byFlow, noFlow, completed, table, badStatus, tl, timeline] = await Promise.all([
          json("runs", "--flow", "trips.book"),
          json("runs", "--flow", "nope"),
          json("runs", "--status", "completed"),
          bin("runs", "--status", "sleeping"),
          bin("runs", "--status", "asleep"),
          bin("run", r.id),
          json("timeline", r.id),
        ]);
        expect(byFlow.items.map((x: Json) => x.id)).toEqual([r.id]);
        expect(noFlow.items).toEqual([]);
        expect(completed.items).toEqual([]);
        expect(table.stdout.split("\n")[0]).toMatch(/^RUN\s+FLOW\s+STATUS\s+SLEEPING ON\s+WAKE AT/);
        expect(table.stdout).toMatch(new RegExp(`${r.id}\\s+trips\\.book\\s+sleeping\\s+wait-for-payment`));
        expect(badStatus.code).not.toBe(0);

        expect(tl.code).toBe(0);
        expect(tl.stdout).toContain(`run ${r.id}  flow trips.book  sleeping`);
        // The time since the entry before (a step after a 4 min sleep shows 4 min), not the step's own.
        expect(tl.stdout).toMatch(/^SEQ\s+KIND\s+NAME\s+AT\s+SINCE PREV\s+DETAIL/m);
        expect(tl.stdout).toMatch(/\b0\s+step\s+book\s.*→ \{.*"seat":"12A"/);
        expect(tl.stdout).toMatch(/\b1\s+sleep\s+wait-for-payment\s.*label wait-for-payment for 1h/);
        expect(timeline.timeline.map((t: Json) => t.kind)).toEqual(["step", "sleep"]);

        const woke = await bin("wake", r.id);
        expect(woke.stderr).toBe("");
        expect(woke.code).toBe(0);
        expect(woke.stdout).toMatch(new RegExp(`^woke ${r.id}`));
        await until(
          async () => (await app.api<Json>(`/api/runs/${r.id}`)).run.status === "completed",
          "the run completed",
        );
        expect(app.read("trips.log")).toEqual(["done t1"]);
        // The run is completed: a second wake is refused as the spec says (not found: not sleeping).
        const [done, again] = await Promise.all([run("run", r.id), run("wake", r.id)]);
        expect(done.stdout).toMatch(/\b2\s+step\s+finish\b/);
        expect(again.code).toBe(1);
        expect(again.stderr).toContain(`run "${r.id}" not found (404 ClockResourceNotFoundError)`);
      },
    );

    it.sequential("schedules lists, pauses, resumes, edits and triggers a clock", async () => {
      const [list, listText] = await Promise.all([json("schedules"), run("schedules")]);
      expect(list.schedules).toEqual([
        expect.objectContaining({ name: "reports.nightly", cron: "0 3 * * *", paused: false }),
      ]);
      expect(listText.stdout).toMatch(
        /reports\.nightly\s+reports\.nightly\s+cron 0 3 \* \* \*\s+UTC\s+active/,
      );
      expect((await run("schedules", "pause", "reports.nightly")).stdout).toContain(
        "paused reports.nightly: paused",
      );
      expect((await json("schedules")).schedules[0]).toMatchObject({ paused: true, nextFireAt: null });
      expect(await json("schedules", "resume", "reports.nightly")).toMatchObject({ paused: false });
      // 30 days: the edited clock must not come due while the test runs (slots align to the epoch).
      const edited = await run("schedules", "edit", "reports.nightly", "--every", "30d");
      expect(edited.code).toBe(0);
      expect((await run("schedules")).stdout).toContain("every 30d (edited)");
      const bad = await run("schedules", "edit", "reports.nightly", "--cron", "not a cron");
      expect(bad.code).toBe(1);
      expect(bad.stderr).toContain("(400 OKE17");
      const t = await bin("schedules", "trigger", "reports.nightly");
      expect(t.code).toBe(0);
      expect(t.stdout).toContain("triggered reports.nightly: message clock:reports.nightly:manual:");
      await until(() => app.read("nightly.log").length === 1, "the triggered fire ran");
      const missing = await run("schedules", "pause", "nope");
      expect(missing.code).toBe(1);
      // A schedule, as the command calls it (the spec's 404 says "cron"), and the command that lists them.
      expect(missing.stderr).toBe(
        'oke: schedule "nope" not found (404 ClockResourceNotFoundError)\n  fix: oke schedules lists them',
      );
    });
  },
);

async function listening(port: number): Promise<boolean> {
  const { connect } = await import("node:net");
  return new Promise((resolve) => {
    const s = connect(port, "127.0.0.1");
    s.once("connect", () => {
      s.destroy();
      resolve(true);
    });
    s.once("error", () => resolve(false));
  });
}

// Beside the drivers' suites; its own two cases one after the other: each picks a free port for its
// Console, and the first checks that nothing listens on its own, which the second must not take.
describe("the Console of `oke start` in production", { timeout: 150_000, concurrent: true }, () => {
  const apps: App[] = [];
  const dirs: string[] = [];
  afterAll(async () => {
    for (const a of apps) await a.stop();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });
  const project = (): string => {
    const dir = mkdtempSync(join(tmpdir(), "oke-ops-prod-"));
    dirs.push(dir);
    cpSync(FIXTURE, dir, { recursive: true });
    rmSync(join(dir, "tsconfig.json"));
    symlinkSync(join(REPO, "node_modules"), join(dir, "node_modules"));
    return dir;
  };

  it.sequential(
    "does not start without an operator token, and the boot log says why; the app itself runs",
    async () => {
      const port = await freePort();
      const app = new App(project(), { OKE_JOURNAL: "file", OKE_CONSOLE_PORT: String(port) }, false);
      apps.push(app);
      await app.start();
      await until(() => app.lines.some((l) => l.includes("okengine console: not started")), "the warning");
      const warning = app.lines.find((l) => l.includes("okengine console: not started"));
      expect(warning).toBeDefined();
      const record = JSON.parse(warning!) as { level: number; msg: string };
      expect(record.level).toBe(40); // a warning
      expect(record.msg).toBe(
        "okengine console: not started — production needs an operator secret, and neither OKE_CONSOLE_TOKEN nor console.tokens is set. Set OKE_CONSOLE_TOKEN (16+ characters) to start it, or console.port: false to turn it off. The app runs on without a Console.",
      );
      expect(app.lines.some((l) => l.includes("okengine console on "))).toBe(false);
      expect(app.lines.some((l) => l.includes("(prod)"))).toBe(true);
      expect(await listening(port)).toBe(false);
      // The app serves; the operator commands say plainly that there is no Console to talk to.
      expect(await app.post("/emit", { n: 1 })).toBe(200);
      const r = await oke(["status", "--url", `http://127.0.0.1:${port}`, "--token", TOKEN]);
      expect(r.code).toBe(2);
      // The refusal alone looks like no app at all: the hint says what keeps a production Console off.
      expect(r.stderr).toBe(
        `oke: cannot reach the Console at http://127.0.0.1:${port} (ECONNREFUSED). Is the app running with its Console on? Pass --url or set OKE_CONSOLE_URL.\n` +
          "  hint: nothing listens there. In prod (oke start) the Console starts only with OKE_CONSOLE_TOKEN (or console.tokens) set; the app's boot log says so (okengine console: not started)",
      );
    },
  );

  it.sequential("starts with OKE_CONSOLE_TOKEN, requires it, and answers it", async () => {
    const port = await freePort();
    const app = new App(project(), {
      OKE_JOURNAL: "file",
      OKE_CONSOLE_PORT: String(port),
      OKE_CONSOLE_TOKEN: TOKEN,
    });
    apps.push(app);
    await app.start();
    expect(app.consoleUrl).toBe(`http://127.0.0.1:${port}`);
    expect(app.lines.some((l) => l.includes("token required, 1 token"))).toBe(true);
    expect(await listening(port)).toBe(true);
    expect((await oke(["status", "--url", app.consoleUrl])).code).toBe(1);
    const ok = await oke(["status", "--url", app.consoleUrl, "--token", TOKEN, "--json"]);
    expect(ok.code).toBe(0);
    expect(JSON.parse(ok.stdout)).toMatchObject({ env: "prod" });
  });
});
