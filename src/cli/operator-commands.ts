// The `oke` operator commands (status, dead, replay, discard, runs, run, wake, terminate, schedules) over a running app's Console HTTP API.
import { existsSync, realpathSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { Command, InvalidArgumentError, Option } from "commander";
import {
  CommandError,
  EXIT_REFUSED,
  createConsoleClient,
  DEFAULT_CONSOLE_URL,
  quietOnClosedStdout,
  type ConsoleClient,
  type Shape,
} from "./console-client.ts";
import { recoveriesNote, type TimelineItem } from "../console/timeline.ts";
import type { ReplayJob } from "../console/replay-jobs.ts";
import { oneLine, plural, shellWord } from "../console/words.ts";
import { holdFix, UNKNOWN_FLOW } from "../durable/mismatch-log.ts";
import { deliveriesOf } from "../console/attempt-history.ts";
import { age, short, table, when } from "./table.ts";

interface ConnFlags {
  url?: string;
  token?: string;
  json?: boolean;
}

// Response shapes, as the Console API sends them (docs/console.md): only the fields printed here.
interface Failure {
  code: string;
  message: string;
  at: number;
  attempt: number;
}
/** An entry of a message's attempt history (console/attempt-history.ts): a failure, or a lapsed attempt. */
type HistoryEntry =
  | (Failure & { outcome: "failed"; delivery: number })
  | { outcome: "lapsed"; delivery: number; attempt: number; message: string };
interface Message {
  id: string;
  signal: string;
  key: string | null;
  status: string;
  attempts: number;
  /** Operator replays of it so far (absent from an older app). */
  replays?: number;
  failures: Failure[];
  /** Its failures and lapsed attempts, by delivery (absent from an older app: the failures alone then). */
  history?: HistoryEntry[];
  payload: unknown;
  createdAt: number;
  updatedAt: number;
}
interface Counts {
  pending?: number;
  inflight?: number;
  dead?: number;
  delivered?: number;
  oldestPendingAgeMs?: number | null;
}
interface SignalRow extends Counts {
  name: string;
  delivery: string;
  flows: string[];
  schedule?: string;
  /** `failed`: copies whose handler failed among the newest `failedOf` delivered (absent from an older app). */
  copies?: Array<Counts & { flow: string; queue: string; failed?: number; failedOf?: number }>;
  throughput: { delivered: number[] };
}
interface RunRow {
  id: string;
  flow: string;
  status: string;
  createdAt: number;
  updatedAt: number;
  wakeAt: number | null;
  /** Takeovers after a lapsed lease (absent from an older app). */
  recoveries?: number;
  parentRunId?: string | null;
  sleepingOn?: string | null;
  error?: { code?: string; message?: string } | null;
  /** Why it waits with no holder, while it is held back (absent otherwise, and from an older app). */
  held?: { code: string; message: string; since: number };
}
/** Work no live instance serves (absent from an older app). */
interface Stranded {
  /** False when no instance is live: nothing was judged. */
  checked: boolean;
  flows: Array<{ name: string; runs: Record<string, number>; dueAt: number | null }>;
  signals: Array<{
    name: string;
    pending: number;
    inflight: number;
    leaseLapsedAt: number | null;
    oldestPendingAgeMs: number | null;
    /** False when the Console's app does not declare the signal (absent from an older app). */
    declared?: boolean;
  }>;
  /** Active clocks with a slot due that no live instance declares (absent from an older app). */
  clocks?: Array<{
    name: string;
    cron: string | null;
    every: string | null;
    timezone: string;
    dueAt: number;
    lastFiredAt: number | null;
    fix: string;
  }>;
}
interface Overview {
  env: string;
  now: number;
  signals: SignalRow[];
  /** `held`: its held-back runs by status, counted in `runs` too (absent from an older app). */
  flows: Array<{
    name: string;
    durable: boolean;
    runs: Record<string, number>;
    held?: Record<string, number>;
  }>;
  /** `copies`: broadcast copies whose handler failed, newest first (absent from an older app). */
  recentFailures: { deadLetters: Message[]; runs: RunRow[]; copies?: Message[] };
  instances: number;
  /** How many live instances run each role (absent from an older app). */
  instanceRoles?: Partial<Record<"all" | "web" | "worker", number>>;
  stranded?: Stranded;
  /** The newest held-back runs, and what to do (absent from an older app). */
  heldBack?: {
    runs: RunRow[];
    more: boolean;
    fix: string;
    /** False when the flows' `held` counts are of the newest 1 000 only (absent from an older app). */
    allCounted?: boolean;
  };
}
interface RunDetail {
  run: RunRow & { input?: unknown; output?: unknown };
  timeline: TimelineItem[];
  /** Entries the Console left out of a long timeline (absent when whole, and from an older app). */
  timelineOmitted?: { count: number; afterSeq: number; beforeSeq: number };
  sleepingOn: string | null;
  ancestors: RunRow[];
  /** Whether `run.parentRunId` names a stored run (absent from an older app). */
  parentRunFound?: boolean;
  /** The parent id past the last stored ancestor, where the chain stops (absent from an older app). */
  unstoredParentId?: string | null;
  children: RunRow[];
  /** What to do about `run.held` (absent from an older app). */
  heldFix?: string | null;
  /** Its recoveries explained, null when none (absent from an older app). */
  recovered?: string | null;
  /** The app's clock when it answered (absent from an older app). */
  now?: number;
  /** No live instance has its flow (null: none is live, nothing judged; absent from an older app). */
  stranded?: boolean | null;
  /** What to do about it, when stranded. */
  strandedFix?: string;
}
interface Schedule {
  name: string;
  flow: string;
  cron: string | null;
  every: string | null;
  timezone: string;
  overridden: boolean;
  paused: boolean;
  orphaned: boolean;
  nextFireAt: number | null;
  lastFiredAt: number | null;
  lastError: { code: string; message: string } | null;
  /** The last fire's delay after its slot, and the slots it skipped (absent from an older app). */
  lagMs?: number | null;
  missedRuns?: number;
  /** Active with a slot due, and no live instance declares it (absent from an older app). */
  stranded?: boolean;
  /** The stored declaration when another version's code set it (null, or absent from an older app). */
  declaredElsewhere?: { cron: string | null; every: string | null; timezone: string } | null;
  /** With it: both specs, which fires and why, and what to do. */
  declaredElsewhereNote?: string | null;
}

const RUN_STATUSES = ["running", "sleeping", "compensating", "completed", "failed"];

// Shapes of the answers, as far as the commands read them: a server that answers 200 with other
// JSON is not a Console (exit 2), rather than a crash in the printing.
type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);
const isStr = (v: unknown): v is string => typeof v === "string";
const isNum = (v: unknown): v is number => typeof v === "number";
const listOf = (v: unknown, item: (x: Obj) => boolean): boolean =>
  Array.isArray(v) && v.every((x) => isObj(x) && item(x));
const isPage = (v: unknown, item: (x: Obj) => boolean): boolean =>
  isObj(v) && listOf(v.items, item) && (v.next === null || isStr(v.next));
const isMessage = (m: Obj): boolean => isStr(m.id) && Array.isArray(m.failures);
const isRun = (r: Obj): boolean => isStr(r.id) && isStr(r.flow) && isStr(r.status);
const isReplayJob = (j: Obj): boolean =>
  isNum(j.id) && isStr(j.signal) && isNum(j.total) && isNum(j.replayed) && isStr(j.state);

const isSchedule = (s: unknown): s is Schedule => isObj(s) && isStr(s.name) && isStr(s.flow);
const shapes = {
  overview: ((v) =>
    isObj(v) &&
    isStr(v.env) &&
    isNum(v.now) &&
    isNum(v.instances) &&
    listOf(v.signals, (s) => isStr(s.name) && isStr(s.delivery) && isObj(s.throughput)) &&
    listOf(v.flows, (f) => isStr(f.name) && isObj(f.runs) && (f.held === undefined || isObj(f.held))) &&
    isObj(v.recentFailures) &&
    Array.isArray(v.recentFailures.runs) &&
    (v.heldBack === undefined ||
      (isObj(v.heldBack) && listOf(v.heldBack.runs, isRun) && isStr(v.heldBack.fix))) &&
    (v.stranded === undefined ||
      (isObj(v.stranded) &&
        listOf(v.stranded.flows, (f) => isStr(f.name) && isObj(f.runs)) &&
        listOf(v.stranded.signals, (x) => isStr(x.name) && isNum(x.pending)) &&
        (v.stranded.clocks === undefined ||
          listOf(
            v.stranded.clocks,
            (c) => isStr(c.name) && isNum(c.dueAt) && isStr(c.fix),
          ))))) as Shape<Overview>,
  messages: ((v) => isPage(v, isMessage)) as Shape<{ items: Message[]; next: string | null }>,
  runs: ((v) => isPage(v, isRun)) as Shape<{
    items: RunRow[];
    next: string | null;
    /** With a flow filter: whether the app has that flow, durable or not (absent from older apps). */
    flowKind?: "durable" | "plain" | "none";
    durableFlows?: string[];
  }>,
  run: ((v) =>
    isObj(v) &&
    isObj(v.run) &&
    isRun(v.run) &&
    listOf(v.timeline, (t) => isStr(t.kind)) &&
    listOf(v.ancestors, isRun) &&
    listOf(v.children, isRun) &&
    (v.now === undefined || isNum(v.now))) as Shape<RunDetail>,
  schedules: ((v) => isObj(v) && Array.isArray(v.schedules) && v.schedules.every(isSchedule)) as Shape<{
    schedules: Schedule[];
  }>,
  schedule: isSchedule as Shape<Schedule>,
  replays: ((v) => isObj(v) && listOf(v.jobs, isReplayJob)) as Shape<{ jobs: ReplayJob[] }>,
  replayStop: ((v) =>
    isObj(v) && isObj(v.job) && isReplayJob(v.job) && typeof v.stopped === "boolean") as Shape<{
    job: ReplayJob;
    stopped: boolean;
  }>,
  /** A replay's or discard's answer: the ids done (or that would be), or a paced job. */
  acted: (key: string, dry: string) =>
    ((v) =>
      isObj(v) &&
      ((Array.isArray(v[key]) && v[key].every(isStr)) ||
        (Array.isArray(v[dry]) && v[dry].every(isStr)) ||
        (isObj(v.job) && isNum(v.job.total))) &&
      (v.backlog === undefined ||
        (isObj(v.backlog) && isNum(v.backlog.pending) && isNum(v.backlog.inflight)))) as Shape<ActedAnswer>,
};

/** What replay and discard answer (docs/console.md); `count`, `more`, `skipped` are absent from older apps. */
interface ActedAnswer {
  /** A discard of pending messages (`--pending`), not of dead letters (absent from an older app). */
  pending?: boolean;
  replayed?: string[];
  discarded?: string[];
  wouldReplay?: string[];
  wouldDiscard?: string[];
  count?: number;
  more?: boolean;
  skipped?: string[];
  job?: { id: string; total: number; rate: number };
  /**
   * The queue's messages that are not dead letters, and whether a live instance consumes the signal
   * (a discard's; a replay's too, absent from an older app).
   */
  backlog?: { pending: number; inflight: number; liveConsumer: boolean | null; declared: boolean };
}

/**
 * The same command for the next page: every option the operator gave (--url when typed, never the
 * token), shell-quoted, and --cursor.
 */
function nextPage(cmd: Command, words: Array<string | undefined>, next: string): string {
  const url = cmd.getOptionValueSource("url") === "cli" ? ["--url", cmd.getOptionValue("url") as string] : [];
  return `more: ${[...words.filter((w): w is string => w !== undefined), ...url, "--cursor", next]
    .map((w, i) => (i === 0 ? w : shellWord(w)))
    .join(" ")}`;
}

/** `--name value` when the value was given. */
const opt = (name: string, v: string | number | undefined): Array<string | undefined> =>
  v === undefined ? [] : [`--${name}`, String(v)];

const parseLimit = (v: string): number => {
  const n = Number(v);
  if (!/^\d+$/.test(v) || n < 1 || n > 500) throw new InvalidArgumentError("expected a number from 1 to 500");
  return n;
};
const parseRate = (v: string): number => {
  const n = Number(v);
  // Decimal only: Number() also reads "0x10" as 16, "1e3" as 1000 and "" as 0.
  if (!/^(\d+(\.\d*)?|\.\d+)$/.test(v) || n < 1 / 3600 || n > 10_000)
    throw new InvalidArgumentError(
      "expected messages per second, at least 0.0003 (one an hour) and at most 10000",
    );
  return n;
};
/** `--since`: epoch ms (digits) or an ISO date; a negative number is neither (Date.parse reads "-5" as a year). */
const parseSince = (v: string): string => {
  const ok = /^\d+$/.test(v) || (/^\d{4}-\d{2}/.test(v) && Number.isFinite(Date.parse(v)));
  if (!ok)
    throw new InvalidArgumentError(
      'expected epoch ms (e.g. 1764590400000) or an ISO date (e.g. 2026-12-01 or "2026-12-01 12:00")',
    );
  return v;
};
const parseStatus = (v: string): string => {
  if (!RUN_STATUSES.includes(v)) throw new InvalidArgumentError(`expected one of ${RUN_STATUSES.join(", ")}`);
  return v;
};

const enc = encodeURIComponent;
const print = (text: string): void => console.log(text);
const printJson = (value: unknown): void => console.log(JSON.stringify(value, null, 2));

/** --url, --token (from OKE_CONSOLE_URL / OKE_CONSOLE_TOKEN) and --json on one command. */
function withConsole(cmd: Command): Command {
  return cmd
    .addOption(
      new Option("--url <url>", `the app's Console address (default: ${DEFAULT_CONSOLE_URL})`).env(
        "OKE_CONSOLE_URL",
      ),
    )
    .addOption(new Option("--token <token>", "an operator token of that app").env("OKE_CONSOLE_TOKEN"))
    .option("--json", "print the Console's JSON answer instead of a table");
}

/** Where to find a value for each argument the commands take, said when one is given empty. */
const ARGUMENT_LISTS: Record<string, string> = {
  signal: "oke status lists the signals",
  ids: "oke dead <signal> lists the dead letters",
  runId: "oke runs lists the runs",
  job: "oke replays lists the jobs",
  name: "oke schedules lists them",
};

/** Options whose empty value is refused: the Console would read it as no filter (or no cursor) and list everything again. */
const EMPTY_OPTION: Record<string, string> = {
  flow: "name a flow, or leave --flow out to list runs of every flow",
  label: "name a sleep label, or leave --label out",
  parent: "name the parent run, or leave --parent out",
  since: "give epoch ms or an ISO date, or leave --since out",
  cursor:
    "pass the next of a previous page (its more: line prints it), or leave --cursor out for the first page",
  cron: 'give a cron, e.g. "0 7 * * *"',
  every: 'give an interval, e.g. "1h"',
  timezone: 'give an IANA zone, e.g. "Europe/Paris"',
};

/**
 * An empty argument or option is a malformed command (exit 1), refused before any request: `oke run ""`
 * asked for the runs list, and `--cursor ""` or `--flow ""` listed everything from page 1.
 */
function refuseEmpty(cmd: Command, positional: unknown[], flags: Record<string, unknown>): void {
  cmd.registeredArguments.forEach((a, i) => {
    const v = positional[i];
    if (v === "" || (Array.isArray(v) && v.includes(""))) {
      const list = ARGUMENT_LISTS[a.name()];
      throw usage(`<${a.name()}> is empty${list === undefined ? "" : `: ${list}`}`);
    }
  });
  for (const [k, why] of Object.entries(EMPTY_OPTION))
    if (flags[k] === "") throw usage(`--${k} is empty: ${why}`);
  if (typeof flags.url === "string" && flags.url.trim() === "") {
    throw usage(
      urlSources(cmd).has("env")
        ? `OKE_CONSOLE_URL is set but empty: set it to the Console's address (e.g. ${DEFAULT_CONSOLE_URL}), or unset it for that default`
        : `--url is empty: give the Console's address (e.g. ${DEFAULT_CONSOLE_URL}), or leave --url out for that default`,
    );
  }
}

/** Where --url came from ("cli", "env", …) on this command and the ones above it: commander keeps it per command. */
function urlSources(cmd: Command): Set<string | undefined> {
  const sources = new Set<string | undefined>();
  for (let c: Command | null = cmd; c !== null; c = c.parent) sources.add(c.getOptionValueSource("url"));
  return sources;
}

/** Runs one operator action; a CommandError becomes its message on stderr and its exit code. */
const act =
  <A extends unknown[]>(run: (client: ConsoleClient, ...args: A) => Promise<void>) =>
  async (...args: A): Promise<void> => {
    // commander passes (...arguments, options, command). `oke schedules --json pause x` puts --json on the
    // parent command: read the options with the parent's merged in.
    const cmd = args[args.length - 1] as Command;
    const flags = cmd.optsWithGlobals<ConnFlags>();
    args[args.length - 2] = { ...(args[args.length - 2] as object), ...flags };
    quietOnClosedStdout();
    try {
      refuseEmpty(cmd, args.slice(0, -2), args[args.length - 2] as Record<string, unknown>);
      const client = createConsoleClient({ url: flags.url, token: flags.token });
      // Not when --url was typed: that address was chosen for this command (an exported
      // OKE_CONSOLE_URL was not: it follows the shell from project to project).
      if (!urlSources(cmd).has("cli"))
        await warnIfAnotherProject(
          createConsoleClient({ url: flags.url, token: flags.token, timeoutMs: 1_000 }),
        );
      await run(client, ...args);
    } catch (e) {
      if (!(e instanceof CommandError)) throw e;
      console.error(e.message);
      process.exitCode = e.exitCode;
    }
  };

const usage = (message: string): CommandError => new CommandError(`oke: ${message}`, 1);

/** The okengine project this directory is in (one with package.json and src/flows), else undefined. */
function projectHere(): string | undefined {
  for (let dir = process.cwd(); ; dir = dirname(dir)) {
    if (existsSync(join(dir, "package.json")) && existsSync(join(dir, "src", "flows"))) return dir;
    if (dirname(dir) === dir) return undefined;
  }
}

const samePath = (a: string, b: string): boolean => {
  try {
    return realpathSync(a) === realpathSync(b);
  } catch {
    return resolve(a) === resolve(b);
  }
};

/**
 * At an address not typed on the command line, run in a project whose app is not the one answering: two projects' apps
 * on one machine both want Console port 6533, the second one's Console stays off, and `oke replay`
 * typed in the second project would act on the first's queues. Said on stderr (the command still
 * runs: the address is the operator's to choose). Silent when the app does not say its root, or the
 * check cannot be made within a second (the command's own request then says why).
 */
async function warnIfAnotherProject(client: ConsoleClient): Promise<void> {
  const here = projectHere();
  if (here === undefined) return;
  const who = await client
    .get("/api/whoami", (v): v is { root?: unknown } => typeof v === "object" && v !== null)
    .catch(() => undefined);
  const root = who?.root;
  if (typeof root !== "string" || samePath(root, here)) return;
  console.error(
    `oke: warning: the Console at ${client.url} belongs to the app of ${root}, not of this project (${here}); ` +
      "this project's app may not be running, or its Console is on another port (console.port): pass --url to choose",
  );
}

function countsCells(c: Counts): Array<number | undefined> {
  return [c.pending, c.inflight, c.dead, c.delivered];
}

function formatStatus(url: string, o: Overview): string {
  const out: string[] = [
    `okengine at ${url} · env ${o.env} · ${o.instances} instance${o.instances === 1 ? "" : "s"} alive${rolesText(o)} · ${when(o.now)}`,
    "",
  ];
  const rows: Array<Array<string | number | undefined>> = [];
  /** Broadcast flows with copies whose handler failed: their DELIVERED counts those too. */
  const copiesFailed: Array<{
    signal: string;
    flow: string;
    queue: string;
    failed: number;
    failedOf?: number;
  }> = [];
  const sum = (xs: number[]): number => xs.reduce((a, b) => a + b, 0);
  for (const s of o.signals) {
    if (s.delivery === "broadcast") {
      rows.push([
        s.name,
        "broadcast",
        undefined,
        undefined,
        undefined,
        undefined,
        undefined,
        sum(s.throughput.delivered),
      ]);
      // Copies are the broadcast's per-flow queues: shown under it, labelled, never as signals.
      for (const c of s.copies ?? []) {
        rows.push([
          // Failed copies are settled delivered (no retry, no dead letter): said beside the count.
          `  ↳ copies for ${c.flow}${(c.failed ?? 0) > 0 ? ` (${c.failed} failed)` : ""}`,
          "copies",
          ...countsCells(c),
          age(c.oldestPendingAgeMs),
          undefined,
        ]);
        if ((c.failed ?? 0) > 0) copiesFailed.push({ signal: s.name, ...c, failed: c.failed! });
      }
      continue;
    }
    rows.push([
      s.name,
      s.schedule !== undefined ? "clock" : s.delivery,
      ...countsCells(s),
      age(s.oldestPendingAgeMs),
      s.delivery === "live" ? undefined : sum(s.throughput.delivered),
    ]);
  }
  if (rows.length === 0) out.push("no signals");
  else
    out.push(
      table(
        // The last column counts deliveries only (throughput.delivered): not emits, failures or dead letters.
        [
          "SIGNAL",
          "DELIVERY",
          "PENDING",
          "INFLIGHT",
          "DEAD",
          "DELIVERED",
          "OLDEST PENDING",
          "DELIVERED 10 MIN",
        ],
        rows,
        { right: ["OLDEST PENDING"] },
      ),
    );
  out.push("");
  const flows = o.flows.filter((f) => f.durable || Object.keys(f.runs).length > 0);
  if (flows.length === 0) out.push("no durable flows");
  else out.push(flowTable(flows, o.heldBack?.allCounted !== false));
  const dead = o.signals.filter((s) => (s.dead ?? 0) > 0);
  // recentFailures.runs is the newest few only: the flows' counts say how many failed runs are kept.
  // A flow no longer in the app has no row above, so its failed runs count through the list at least.
  const failed = Math.max(
    o.flows.reduce((n, f) => n + (f.runs.failed ?? 0), 0),
    o.recentFailures.runs.length,
  );
  const stranded = strandedLines(o);
  const held = heldLine(o);
  if (dead.length > 0 || failed > 0 || held !== undefined || stranded.length > 0 || copiesFailed.length > 0) {
    out.push("");
    for (const s of dead)
      out.push(`${s.dead} dead letter${s.dead === 1 ? "" : "s"} on ${s.name}: oke dead ${s.name}`);
    for (const c of copiesFailed) {
      // The count is among the newest copies the Console read: "N of the last M" when it read a full page.
      const among = c.failedOf !== undefined && c.failed < c.failedOf ? ` of the last ${c.failedOf}` : "";
      const newest = o.recentFailures.copies?.find((m) => m.signal === c.queue)?.failures.at(-1);
      out.push(
        `${c.failed}${among} broadcast ${c.failed === 1 ? "copy" : "copies"} of ${oneLine(c.signal)} failed in ${oneLine(c.flow)} ` +
          `(counted as delivered; broadcast does not retry)${newest === undefined ? "" : `, newest: ${short(oneLine(`${newest.code} ${newest.message}`), 60)}`}`,
      );
    }
    if (failed > 0) out.push(`${failed} failed run${failed === 1 ? "" : "s"}: oke runs --status failed`);
    if (held !== undefined) out.push(held);
    out.push(...stranded);
  }
  return out.join("\n");
}

/**
 * The FLOW table: runs by status. Held-back runs (running or compensating, with no holder) get a HELD
 * column of their own, left out of RUNNING and COMPENSATING, so they are not read as worked on; the
 * column is there only while some are held back. `n+` when the Console counted the newest only.
 */
function flowTable(flows: Overview["flows"], allCounted: boolean): string {
  const heldOf = (f: Overview["flows"][number]): number =>
    Object.values(f.held ?? {}).reduce((a, b) => a + b, 0);
  if (!flows.some((f) => heldOf(f) > 0))
    return table(
      ["FLOW", ...RUN_STATUSES.map((s) => s.toUpperCase())],
      flows.map((f) => [f.name, ...RUN_STATUSES.map((s) => f.runs[s] ?? 0)]),
    );
  const at = RUN_STATUSES.indexOf("compensating") + 1;
  const statuses = RUN_STATUSES.map((s) => s.toUpperCase());
  return table(
    ["FLOW", ...statuses.slice(0, at), "HELD", ...statuses.slice(at)],
    flows.map((f) => {
      // Never below 0: the Console may share a run count read a moment before the held ones.
      const cells = RUN_STATUSES.map((s) => Math.max(0, (f.runs[s] ?? 0) - (f.held?.[s] ?? 0)));
      const held = allCounted ? heldOf(f) : `${heldOf(f)}+`;
      return [f.name, ...cells.slice(0, at), held, ...cells.slice(at)];
    }),
    // Right-aligned as the counts beside it, `25+` too.
    { right: ["HELD"] },
  );
}

/**
 * The live instances' roles, " (1 web, 2 worker)", when any runs part of the app; nothing when every
 * one runs all of it (the default), or the app is older than roles.
 */
function rolesText(o: Overview): string {
  const r = o.instanceRoles;
  if (r === undefined || ((r.web ?? 0) === 0 && (r.worker ?? 0) === 0)) return "";
  const parts = (["web", "worker", "all"] as const).filter((k) => (r[k] ?? 0) > 0).map((k) => `${r[k]} ${k}`);
  return ` (${parts.join(", ")})`;
}

/**
 * How many runs are held back (the overview lists the newest 20, and says when there are more), why
 * and where to see them; undefined when none is.
 */
function heldLine(o: Overview): string | undefined {
  const hb = o.heldBack;
  if (hb === undefined || hb.runs.length === 0) return undefined;
  const n = hb.more ? `${hb.runs.length}+ runs` : plural(hb.runs.length, "run");
  const why = hb.runs.every((r) => r.held?.code === "OKE1301")
    ? "journal does not match the code"
    : hb.runs.every((r) => r.held?.code === UNKNOWN_FLOW)
      ? "taken by an instance without their flow"
      : "given back with a reason";
  return `${n} held back (${why}): oke runs --held`;
}

/** A run's status as the lists show it: a held-back run is running (or compensating) and waits. */
const runStatus = (r: RunRow): string => (r.held ? `${r.status} · held back` : r.status);

/** One line per flow and signal no live instance serves: what waits, since when, what to do. */
function strandedLines(o: Overview): string[] {
  const st = o.stranded;
  if (st === undefined) return [];
  if (!st.checked)
    return ["no live instance heartbeats to this store: cannot tell which runs and messages are stranded"];
  const out: string[] = [];
  for (const f of st.flows) {
    const name = oneLine(f.name);
    const n = Object.values(f.runs).reduce((a, b) => a + b, 0);
    const by = RUN_STATUSES.filter((k) => (f.runs[k] ?? 0) > 0)
      .map((k) => `${k} ${f.runs[k]}`)
      .join(", ");
    const due =
      f.dueAt === null ? "" : `, ${f.dueAt <= o.now ? "due since" : "next due"} ${when(f.dueAt) ?? ""}`;
    out.push(
      `stranded: ${plural(n, "run")} of ${name} (${by}${due}): no live instance runs this flow; deploy it again (they resume where they stopped), list them: oke runs --flow ${shellWord(f.name)}`,
    );
  }
  for (const s of st.signals) {
    const what = [
      s.pending > 0 ? `${s.pending} pending` : undefined,
      s.leaseLapsedAt !== null ? `${s.inflight} inflight (lease lapsed)` : undefined,
    ]
      .filter((x) => x !== undefined)
      .join(" and ");
    const n = s.pending + (s.leaseLapsedAt !== null ? s.inflight : 0);
    const oldest = s.oldestPendingAgeMs === null ? "" : `, oldest ${age(s.oldestPendingAgeMs) ?? ""}`;
    out.push(
      `stranded: ${what} ${n === 1 ? "message" : "messages"} on ${oneLine(s.name)}${oldest}: no live instance consumes this signal` +
        (s.declared === false ? " and this app does not declare it (removed from the code?)" : "") +
        "; deploy its worker again (they wait, none is lost)" +
        (s.pending > 0
          ? `, or remove what is pending with oke discard ${shellWord(s.name)} --pending --all`
          : ""),
    );
  }
  for (const c of st.clocks ?? []) {
    const spec = c.cron !== null ? `cron ${c.cron} ${c.timezone}` : `every ${c.every ?? "?"}`;
    const last = c.lastFiredAt === null ? "never fired" : `last fired ${when(c.lastFiredAt) ?? ""}`;
    out.push(
      `stranded: clock ${oneLine(c.name)} (${spec}, due since ${when(c.dueAt) ?? ""}, ${last}): active, but no live instance declares it, so nothing fires it. ${oneLine(c.fix)} (oke schedules pause ${shellWord(c.name)})`,
    );
  }
  return out;
}

function formatDead(page: { items: Message[]; next: string | null }, signal: string, more: string): string {
  if (page.items.length === 0) return `no dead letters on ${signal}`;
  const out: string[] = [`dead letters of ${signal} (oldest first):`];
  for (const m of page.items) {
    out.push("");
    const replays = m.replays === undefined ? "" : `  replays ${m.replays}`;
    out.push(
      `${m.id}  attempts ${m.attempts}${replays}  key ${m.key ?? "-"}  emitted ${when(m.createdAt)}  dead since ${when(m.updatedAt)}`,
    );
    out.push(`  payload ${short(JSON.stringify(m.payload) ?? "undefined", 100)}`);
    out.push(...historyLines(m));
  }
  if (page.next !== null) out.push("", more);
  return out.join("\n");
}

/** A failure as `oke dead` prints it. */
const failureLine = (f: Failure): string =>
  `  attempt ${f.attempt}  ${when(f.at)}  ${f.code}  ${short(f.message, 100)}`;

/** The line where a replayed delivery's attempts begin. */
const replayLine = (n: number, replays: number | undefined): string =>
  `  -- replay ${n}${replays === undefined ? "" : ` of ${replays}`}: attempts count from 1 again --`;

/**
 * A message's attempts: the Console's `history` (failures and lapsed attempts, each with its delivery),
 * or from an older app its failures alone, split into deliveries by the Console's own rule
 * (attempt-history deliveriesOf).
 */
function historyLines(m: Message): string[] {
  const out: string[] = [];
  if (m.history !== undefined) {
    if (m.history.length === 0) out.push("  (no failure recorded)");
    let delivery = 0;
    for (const e of m.history) {
      if (e.delivery !== delivery) out.push(replayLine((delivery = e.delivery), m.replays));
      out.push(e.outcome === "lapsed" ? `  attempt ${e.attempt}  ${e.message}` : failureLine(e));
    }
    return out;
  }
  if (m.failures.length === 0) out.push("  (no failure recorded)");
  const deliveries = deliveriesOf(m.failures, m.replays);
  m.failures.forEach((f, i) => {
    if (i > 0 && deliveries[i] !== deliveries[i - 1]) out.push(replayLine(deliveries[i]!, m.replays));
    out.push(failureLine(f));
  });
  return out;
}

function formatRuns(page: { items: RunRow[]; next: string | null }, more: string): string {
  if (page.items.length === 0) return "no runs";
  const out = table(
    ["RUN", "FLOW", "STATUS", "SLEEPING ON", "WAKE AT", "RECOVERIES", "CREATED", "PARENT", "ERROR"],
    page.items.map((r) => [
      r.id,
      r.flow,
      runStatus(r),
      r.sleepingOn,
      when(r.wakeAt),
      r.recoveries,
      when(r.createdAt),
      r.parentRunId,
      r.error
        ? short(`${r.error.code ?? ""} ${r.error.message ?? ""}`.trim(), 50)
        : r.held
          ? short(`${r.held.code} ${r.held.message}`, 50)
          : undefined,
    ]),
  );
  // What to do about the held-back runs listed, once per reason that has advice.
  const fixes = [...new Set(page.items.flatMap((r) => (r.held ? [r.held.code] : [])))].flatMap((code) => {
    const fix = holdFix(code);
    return fix === null ? [] : [`held back (${code}): ${fix}`];
  });
  const tail = [...fixes, ...(page.next === null ? [] : [more])];
  return tail.length === 0 ? out : `${out}\n\n${tail.join("\n")}`;
}

function detailOf(t: TimelineItem): string | undefined {
  if (t.kind === "sleep")
    return `label ${t.label ?? "-"}${t.duration ? ` for ${t.duration}` : ""}, wakes ${when(t.wakeAt) ?? "-"}`;
  if (t.kind === "emit") {
    if (t.eventId !== undefined) return `${t.delivery ?? "broadcast"} event ${t.eventId}`;
    return t.messageId
      ? `message ${t.messageId} (${t.messageStatus ?? "gone: pruned or discarded"})`
      : undefined;
  }
  const parts: string[] = [];
  if (t.error) parts.push(`error ${t.error.code}: ${short(t.error.message, 60)}`);
  if (t.childRunId) parts.push(`child run ${t.childRunId}`);
  if (t.preview !== undefined) parts.push(`→ ${short(t.preview, 60)}`);
  if (t.closes !== undefined) parts.push(`ends the step (its body's effects: ${t.closes.join(", ")})`);
  return parts.join(", ") || undefined;
}

/** A parent id the store holds no run of, in the words of the Console's message and run pages. */
const unstoredRun = (id: string): string =>
  `flow invocation ${oneLine(id)} (no run stored: not durable, or pruned — no timeline)`;

/** A timeline longer than this prints its head and tail only (`oke run --all` prints every entry). */
const TIMELINE_SHOWN = { over: 100, head: 10, tail: 40 };

function formatRun(d: RunDetail, all = false): string {
  const r = d.run;
  const out: string[] = [`run ${r.id}  flow ${r.flow}  ${runStatus(r)}`];
  out.push(`created ${when(r.createdAt)}  updated ${when(r.updatedAt)}  recoveries ${r.recoveries ?? 0}`);
  // An older app sends no `recovered`: the same line, without the bound it did not send.
  const recovered =
    d.recovered === undefined ? recoveriesNote({ ...r, recoveries: r.recoveries ?? 0 }, null) : d.recovered;
  if (recovered !== null) out.push(recovered);
  if (r.held) {
    out.push(`held back since ${when(r.held.since) ?? "-"}: ${r.held.code} ${oneLine(r.held.message)}`);
    const fix = d.heldFix === undefined ? holdFix(r.held.code) : d.heldFix;
    if (fix !== null) out.push(`  ${fix}`);
  }
  out.push(...sleepAndStrandedLines(d));
  if (r.error) out.push(`error ${r.error.code ?? ""} ${r.error.message ?? ""}`.trimEnd());
  // A parent no run is stored for (an HTTP request's flow invocation, a pruned run) is named, not
  // left out: `oke run` of it would only answer 404. An older app says nothing of it; with no
  // ancestor found, the parent it names is not stored either.
  if (d.ancestors.length > 0) {
    const end = d.unstoredParentId ? ` ← ${unstoredRun(d.unstoredParentId)}` : "";
    out.push(
      `parent chain: ${d.ancestors.map((a) => `${a.id} (${a.flow}, ${runStatus(a)})`).join(" ← ")}${end}`,
    );
  } else if (r.parentRunId && d.parentRunFound !== true) out.push(`parent: ${unstoredRun(r.parentRunId)}`);
  if (d.children.length > 0)
    out.push(`children: ${d.children.map((c) => `${c.id} (${c.flow}, ${runStatus(c)})`).join(", ")}`);
  out.push("");
  if (d.timeline.length === 0) out.push("no journal entries yet");
  else {
    // A run of thousands of steps printed thousands of lines: the start and the latest entries, the
    // ones an operator reads, and a line saying how many are left out and how to see them.
    const { over, head, tail } = TIMELINE_SHOWN;
    // The Console sends a long timeline's head and tail only (50 and 100, more than printed here)
    // unless asked for all: the total counts what it left out.
    const total = d.timeline.length + (d.timelineOmitted?.count ?? 0);
    const cut = !all && total > over;
    const rows = (ts: TimelineItem[]) =>
      ts.map((t) => [t.seq, t.kind, t.name, when(t.at), age(t.tookMs), detailOf(t)]);
    const lines = table(
      // tookMs is the time since the entry before (or the run's start): a step after a sleep shows the sleep.
      ["SEQ", "KIND", "NAME", "AT", "SINCE PREV", "DETAIL"],
      cut ? [...rows(d.timeline.slice(0, head)), ...rows(d.timeline.slice(-tail))] : rows(d.timeline),
    ).split("\n");
    // Between the head's rows and the tail's, after the header line; the columns stay aligned.
    if (cut)
      lines.splice(
        1 + head,
        0,
        `… ${total - head - tail} entries left out (oke run ${shellWord(r.id)} --all, or --json) …`,
      );
    out.push(lines.join("\n"));
  }
  return out.join("\n");
}

/**
 * Where a sleeping run stands, and a stranded run's line (no live instance has its flow: waking it
 * would resume nothing). `oke wake` is suggested only for a sleeper whose wake time is ahead and whose
 * flow a live instance has (or, from an older app, when that cannot be told).
 */
function sleepAndStrandedLines(d: RunDetail): string[] {
  const r = d.run;
  const flow = oneLine(r.flow);
  const stranded =
    d.stranded === true
      ? [
          `  ${oneLine(d.strandedFix ?? "It resumes once an instance that has the flow runs (deploy it again).")}`,
        ]
      : [];
  if (r.status !== "sleeping")
    return d.stranded === true ? [`stranded: no live instance has flow ${flow}`, ...stranded] : [];
  const on = `sleeping on ${d.sleepingOn ?? "-"}`;
  const due = d.now !== undefined && r.wakeAt !== null && r.wakeAt <= d.now;
  const at = due ? `${on}, due since ${when(r.wakeAt) ?? "-"}` : `${on} until ${when(r.wakeAt) ?? "-"}`;
  if (d.stranded === true) return [`${at}: stranded, no live instance has flow ${flow}`, ...stranded];
  if (!due) return [`${at}  (oke wake ${r.id} to wake it now)`];
  if (d.stranded === null)
    return [`${at}: no instance is live; it resumes once an instance that has flow ${flow} runs`];
  return [`${at}: an instance resumes it as soon as one is free`];
}

function formatSchedules(list: Schedule[]): string {
  if (list.length === 0) return "no schedules";
  const out = table(
    ["SCHEDULE", "FLOW", "SPEC", "ZONE", "STATE", "NEXT FIRE", "LAST FIRED", "LAST ERROR"],
    list.map((s) => [
      s.name,
      s.flow,
      // "(other version)": the spec in force is another version's declaration, explained below the table.
      `${s.cron !== null ? `cron ${s.cron}` : `every ${s.every ?? "?"}`}${s.overridden ? " (edited)" : isStr(s.declaredElsewhereNote) ? " (other version)" : ""}`,
      // A zone means nothing to an interval (an edit to `every` may leave the cron's zone stored).
      s.cron !== null ? s.timezone : undefined,
      scheduleState(s),
      when(s.nextFireAt),
      lastFired(s),
      s.lastError ? short(`${s.lastError.code} ${s.lastError.message}`, 40) : undefined,
    ]),
  );
  const notes = list.flatMap((s) =>
    isStr(s.declaredElsewhereNote) ? [`note: ${oneLine(s.name)}: ${oneLine(s.declaredElsewhereNote)}`] : [],
  );
  return notes.length === 0 ? out : `${out}\n\n${notes.join("\n")}`;
}

/**
 * The last fire, and how it went when not on time: a fire a second or more after its slot (a catch-up
 * after downtime, a busy fleet) says how late, and slots skipped before it (catch-up "one") how many.
 */
function lastFired(s: Schedule): string | undefined {
  const at = when(s.lastFiredAt);
  if (at === undefined) return undefined;
  const how = [
    typeof s.lagMs === "number" && s.lagMs >= 1_000 ? `${age(s.lagMs) ?? ""} after its slot` : undefined,
    typeof s.missedRuns === "number" && s.missedRuns > 0 ? `${s.missedRuns} missed` : undefined,
  ].filter((x) => x !== undefined);
  return how.length === 0 ? at : `${at} (${how.join(", ")})`;
}

function formatReplays(jobs: ReplayJob[]): string {
  if (jobs.length === 0) return "no paced replays (oke replay <signal> --all --rate <n> starts one)";
  return table(
    ["JOB", "SIGNAL", "RATE/S", "REPLAYED", "SKIPPED", "STATE", "NEXT BATCH", "BY"],
    jobs.map((j) => [
      j.id,
      j.signal,
      j.rate,
      `${j.replayed} of ${j.total}`,
      j.skipped,
      j.state,
      when(j.nextAt),
      j.actor,
    ]),
  );
}

/** orphaned, paused, stranded (active, due, and no live instance declares it: see oke status) or active. */
const scheduleState = (s: Schedule): string =>
  s.orphaned ? "orphaned" : s.paused ? "paused" : s.stranded === true ? "stranded" : "active";

const scheduleLine = (verb: string, s: Schedule): string =>
  `${verb} ${s.name}: ${scheduleState(s)}, next fire ${when(s.nextFireAt) ?? "-"}`;

/** Target of replay/discard: the ids given, or every dead letter (pending message) with --all, never both or neither. */
function targetOf(
  ids: string[],
  all: boolean | undefined,
  what = "dead letters",
): { ids: string[] } | { all: true } {
  if (all && ids.length > 0) throw usage("give message ids or --all, not both");
  if (all) return { all: true };
  if (ids.length === 0) throw usage(`name the ${what} to act on (message ids), or pass --all`);
  return { ids };
}

/** What a replay or discard acts on, in words: dead letters, or pending messages (`discard --pending`). */
const actedKind = (res: ActedAnswer): { one: string; many: string } =>
  res.pending === true
    ? { one: "pending message", many: "pending messages" }
    : { one: "dead letter", many: "dead letters" };

/** The ids named that were not dead letters: from the answer, or (an older app) what it did not list. */
function skippedOf(res: ActedAnswer, body: { ids: string[] } | { all: true }): string[] {
  if (res.skipped !== undefined) return res.skipped;
  if (!("ids" in body)) return [];
  const done = new Set(res.replayed ?? res.discarded ?? res.wouldReplay ?? res.wouldDiscard ?? []);
  return body.ids.filter((id) => !done.has(id));
}

const skippedLine = (signal: string, res: ActedAnswer, body: { ids: string[] } | { all: true }): string => {
  const skipped = skippedOf(res, body);
  return skipped.length > 0
    ? `\nnot ${actedKind(res).many} of ${signal} (skipped): ${skipped.join(", ")}`
    : "";
};

/**
 * Ids were named and none of them was (or, dry, would be) replayed or discarded: exit 1, so a script
 * that acts on given messages learns nothing happened. `--all` with nothing dead is not a failure:
 * nothing was asked of any message in particular.
 */
function nothingActed(
  verb: "replay" | "discard",
  signal: string,
  res: ActedAnswer,
  body: { ids: string[] } | { all: true },
): CommandError | undefined {
  if (!("ids" in body)) return undefined;
  const dry = verb === "replay" ? res.wouldReplay : res.wouldDiscard;
  const n =
    res.job !== undefined
      ? res.job.total
      : (res.count ?? (dry ?? (verb === "replay" ? res.replayed : res.discarded) ?? []).length);
  if (n > 0) return undefined;
  const done = verb === "replay" ? "replayed" : "discarded";
  const head = dry !== undefined ? `nothing would be ${done}` : `nothing ${done}`;
  const kind = actedKind(res).one;
  const why =
    body.ids.length === 1
      ? `${body.ids[0]} is not a ${kind} of ${signal}`
      : `none of the ${body.ids.length} ids given is a ${kind} of ${signal}`;
  // Pending messages have no listing command of their own: a dry run of --all lists them.
  const lists =
    res.pending === true
      ? `oke discard ${shellWord(signal)} --pending --all --dry-run lists them`
      : `oke dead ${shellWord(signal)} lists them`;
  return new CommandError(`oke: ${head}: ${why} (${lists})`, EXIT_REFUSED);
}

/** What a replay or discard did (or, dry, would do): the count, the cap, the ids, the ids skipped. */
function actedText(
  verb: "replay" | "discard",
  signal: string,
  res: ActedAnswer,
  body: { ids: string[] } | { all: true },
): string {
  const dry = verb === "replay" ? res.wouldReplay : res.wouldDiscard;
  const ids = dry ?? (verb === "replay" ? res.replayed : res.discarded) ?? [];
  const n = res.count ?? ids.length;
  const kind = actedKind(res);
  const what = `${n} ${n === 1 ? kind.one : kind.many} of ${signal}`;
  const more = res.more ? " (and more past the cap: run it again)" : "";
  const head =
    dry !== undefined
      ? `dry run: would ${verb} ${what}${more}; nothing changed`
      : `${verb === "replay" ? "replayed" : "discarded"} ${what}${more}`;
  const backlog =
    verb === "replay"
      ? replayNote(res.backlog, n, dry !== undefined)
      : "all" in body && res.backlog !== undefined
        ? res.pending === true
          ? pendingNote(res.backlog, dry !== undefined)
          : backlogNote(res.backlog, signal)
        : "";
  return `${head}${backlog}${ids.length > 0 ? `\n${ids.join("\n")}` : ""}${skippedLine(signal, res, body)}`;
}

/**
 * A discard --all's word on the messages it left: pending and inflight ones are not dead letters, and
 * no command deletes them. Who delivers them, in the words of `oke status`'s stranded line.
 */
function backlogNote(b: NonNullable<ActedAnswer["backlog"]>, signal: string): string {
  if (b.pending + b.inflight === 0) return "";
  const counts = [b.pending > 0 ? `${b.pending} pending` : "", b.inflight > 0 ? `${b.inflight} inflight` : ""]
    .filter((x) => x !== "")
    .join(" and ");
  const one = b.pending + b.inflight === 1;
  const who =
    b.liveConsumer === null
      ? "no live instance heartbeats to this store, so whether one consumes this signal cannot be told"
      : b.liveConsumer
        ? `a live instance consumes this signal and delivers ${one ? "it" : "them"}`
        : "no live instance consumes this signal" +
          (b.declared ? "" : " and this app does not declare it (removed from the code?)") +
          `; deploy its worker again (${one ? "it waits, it is not lost" : "they wait, none is lost"})` +
          (b.pending > 0
            ? `, or remove what is pending with oke discard ${shellWord(signal)} --pending --all`
            : "");
  return `; its ${counts} ${one ? "message is not a dead letter" : "messages are not dead letters"} (discard removes dead letters only): ${who}`;
}

/**
 * A replay's word on who delivers what it replayed (or, dry, would): replayed messages are pending
 * again, and with no live instance consuming the signal (its worker removed by a deploy) they wait
 * there. Nothing when a live instance consumes it, nothing was replayed, or the app is older.
 */
function replayNote(b: ActedAnswer["backlog"], n: number, dry: boolean): string {
  if (b === undefined || n === 0 || b.liveConsumer === true) return "";
  if (b.liveConsumer === null)
    return "; no live instance heartbeats to this store, so whether one consumes this signal cannot be told";
  const they = n === 1 ? (dry ? "it would wait" : "it waits") : dry ? "they would wait" : "they wait";
  return `; no live instance consumes this signal: ${they} pending until its worker is deployed again (${n === 1 ? "it is not lost" : "none is lost"})`;
}

/**
 * A discard --pending --all's word on the queue after it (or, dry, now): inflight messages are left
 * to their attempt, and a live consumer may claim pending ones before the discard reaches them.
 */
function pendingNote(b: NonNullable<ActedAnswer["backlog"]>, dry: boolean): string {
  const parts: string[] = [];
  if (b.inflight > 0)
    parts.push(
      `${b.inflight} inflight ${b.inflight === 1 ? "message is" : "messages are"} left to ${b.inflight === 1 ? "its attempt" : "their attempts"}`,
    );
  if (!dry && b.pending > 0)
    parts.push(`${b.pending} pending ${b.pending === 1 ? "message" : "messages"} left`);
  if (b.liveConsumer === true)
    parts.push(
      "a live instance consumes this signal: it claims pending messages the discard has not reached",
    );
  return parts.length === 0 ? "" : `; ${parts.join("; ")}`;
}

/**
 * A wake that only moved the wake time: who will resume the run. A run of a flow no live instance
 * has (stranded, as `oke status` tells) waits for an instance that has it; saying "as soon as one is
 * free" there would be untrue.
 */
async function wokeLater(c: ConsoleClient, runId: string): Promise<string> {
  const moved = `woke ${runId}: its wake time is now`;
  let flow: string;
  let stranded: Stranded | undefined;
  try {
    const [d, o] = await Promise.all([
      c.get(`/api/runs/${enc(runId)}`, shapes.run),
      c.get("/api/overview", shapes.overview),
    ]);
    flow = d.run.flow;
    stranded = o.stranded;
  } catch {
    // The wake is done; only who resumes it is unknown.
    return `${moved}; an instance that has its flow resumes it as soon as one is free`;
  }
  if (stranded?.checked === false)
    return `${moved}; no instance is live: it resumes once an instance that has flow ${flow} runs`;
  if (stranded?.flows.some((f) => f.name === flow))
    return `${moved}, but no live instance has flow ${flow} (stranded): it resumes once an instance that has the flow runs (deploy it again)`;
  return `${moved}; an instance resumes it as soon as one is free`;
}

/**
 * The run read once after a wake that resumed it: an error saying it is held back, with why and what
 * to do as `oke run` says it, when it is; undefined otherwise (or when the read fails: the wake is done).
 * One read, no waiting: a hold found after it is not seen here (oke run shows it).
 */
async function heldAfterWake(c: ConsoleClient, runId: string): Promise<CommandError | undefined> {
  const d = await c.get(`/api/runs/${enc(runId)}`, shapes.run).catch(() => undefined);
  const held = d?.run.held;
  if (d === undefined || held === undefined) return undefined;
  const fix = d.heldFix === undefined ? holdFix(held.code) : d.heldFix;
  return new CommandError(
    `oke: run ${runId} was resumed, then held back (${held.code}): ${oneLine(held.message)}` +
      (fix === null ? "" : `\n  fix: ${oneLine(fix)}`),
    EXIT_REFUSED,
  );
}

/** Adds the operator commands to the `oke` program. */

/** What a terminate did to the run's message (a durable consumer's), in one line. */
function terminatedMessageLine(m: { id: string; signal: string; outcome: string }): string {
  const which = `its message ${m.id} on ${oneLine(m.signal)}`;
  switch (m.outcome) {
    case "dead":
      return `${which} is now a dead letter: oke replay ${m.signal} ${m.id} runs its work afresh`;
    case "delivered":
      return `${which} stays delivered, with the run's failure recorded (its signal keeps no dead letters)`;
    case "pending":
    case "inflight":
      return `${which} is ${m.outcome}: its next claim finds the run terminated and makes it a dead letter`;
    case "dead-already":
      return `${which} is already a dead letter`;
    default:
      return `${which} was claimed or settled otherwise meanwhile; left as it is (oke dead ${m.signal} shows the dead letters)`;
  }
}

export function addOperatorCommands(program: Command): void {
  withConsole(
    program
      .command("status")
      .description(
        "signals with their counts, flows with their runs, recent failures (from a running app's Console)",
      ),
  ).action(
    act(async (c, flags: ConnFlags) => {
      const o = await c.get("/api/overview", shapes.overview);
      if (flags.json) printJson(o);
      else print(formatStatus(c.url, o));
    }),
  );

  withConsole(
    program
      .command("dead")
      .alias("dead-letters")
      .description("dead letters of a once signal, each with its failure history")
      .argument("<signal>", "the once signal")
      .option("--limit <n>", "at most this many (1-500, default 50)", parseLimit)
      .option("--cursor <cursor>", "the next page (printed under a full page)"),
  ).action(
    act(async (c, signal: string, flags: ConnFlags & { limit?: number; cursor?: string }, cmd: Command) => {
      const q = new URLSearchParams({ limit: String(flags.limit ?? 50) });
      if (flags.cursor) q.set("cursor", flags.cursor);
      const page = await c.get(`/api/signals/${enc(signal)}/dead?${q.toString()}`, shapes.messages);
      if (flags.json) printJson(page);
      else
        print(
          formatDead(
            page,
            signal,
            nextPage(cmd, ["oke", "dead", signal, ...opt("limit", flags.limit)], page.next ?? ""),
          ),
        );
    }),
  );

  withConsole(
    program
      .command("replay")
      .description("deliver dead letters once more (their failure history is kept)")
      .argument("<signal>", "the once signal")
      .argument("[ids...]", "dead letters to replay (message ids)")
      .option("--all", "every dead letter of the signal (up to 100 000 per call)")
      .option("--dry-run", "say what would be replayed and change nothing")
      .option(
        "--rate <n>",
        "replay n per second in the background (oke replays follows it; oke replays stop <job> ends it)",
        parseRate,
      ),
  ).action(
    act(
      async (
        c,
        signal: string,
        ids: string[],
        flags: ConnFlags & { all?: boolean; dryRun?: boolean; rate?: number },
      ) => {
        const body = {
          ...targetOf(ids, flags.all),
          ...(flags.dryRun ? { dryRun: true } : {}),
          ...(flags.rate ? { rate: flags.rate } : {}),
        };
        const res = await c.post(
          `/api/signals/${enc(signal)}/replay`,
          body,
          shapes.acted("replayed", "wouldReplay"),
        );
        if (flags.json) printJson(res);
        else if (res.job)
          print(
            `replaying ${res.job.total} dead letter${res.job.total === 1 ? "" : "s"} of ${signal} at ${res.job.rate}/s in the background (job ${res.job.id})${res.more ? "; more past the cap: run it again once this job is done" : ""}${replayNote(res.backlog, res.job.total, false)}${skippedLine(signal, res, body)}`,
          );
        else print(actedText("replay", signal, res, body));
        const none = nothingActed("replay", signal, res, body);
        if (none !== undefined) throw none;
      },
    ),
  );

  withConsole(
    program
      .command("discard")
      .description("delete dead letters (or, with --pending, pending messages) for good")
      .argument("<signal>", "the once signal")
      .argument("[ids...]", "dead letters to discard (message ids)")
      .option("--all", "every dead letter of the signal (up to 100 000 per call)")
      .option(
        "--pending",
        "pending messages instead of dead letters: a queue nothing consumes any more (inflight ones are never touched)",
      )
      .option("--dry-run", "say what would be discarded and change nothing"),
  ).action(
    act(
      async (
        c,
        signal: string,
        ids: string[],
        flags: ConnFlags & { all?: boolean; dryRun?: boolean; pending?: boolean },
      ) => {
        const body = {
          ...targetOf(ids, flags.all, flags.pending ? "pending messages" : "dead letters"),
          ...(flags.dryRun ? { dryRun: true } : {}),
        };
        // Its own endpoint, not a field of discard's body: an older app would ignore the field and
        // delete dead letters; it answers an endpoint it does not have with 404 OKE1606 instead.
        const res = await c
          .post(
            `/api/signals/${enc(signal)}/${flags.pending ? "discard-pending" : "discard"}`,
            body,
            shapes.acted("discarded", "wouldDiscard"),
          )
          .catch((e: unknown) => {
            if (flags.pending && e instanceof CommandError && e.message.includes("no endpoint POST"))
              throw new CommandError(
                `${e.message}\n  fix: this app's okengine is older than oke discard --pending; upgrade the app to use it`,
                e.exitCode,
              );
            throw e;
          });
        if (flags.json) printJson(res);
        else print(actedText("discard", signal, res, body));
        const none = nothingActed("discard", signal, res, body);
        if (none !== undefined) throw none;
      },
    ),
  );

  withConsole(
    program
      .command("runs")
      .description("durable runs, newest first")
      .addOption(
        new Option("--status <status>", `only runs in this status: ${RUN_STATUSES.join(", ")}`).argParser(
          parseStatus,
        ),
      )
      .option("--flow <flow>", "only runs of this flow")
      .option("--label <label>", "only sleeping runs whose current sleep has this label")
      .option("--parent <runId>", "only children of this run")
      .option("--held", "only runs held back (their journal does not match the code; oke run <id> says why)")
      .option("--since <time>", "created at or after (ISO date or epoch ms)", parseSince)
      .option("--limit <n>", "at most this many (1-500, default 50)", parseLimit)
      .option("--cursor <cursor>", "the next page (printed under a full page)"),
  ).action(
    act(
      async (
        c,
        flags: ConnFlags & {
          status?: string;
          flow?: string;
          label?: string;
          parent?: string;
          since?: string;
          held?: boolean;
          limit?: number;
          cursor?: string;
        },
        cmd: Command,
      ) => {
        const q = new URLSearchParams();
        const words: Array<string | undefined> = ["oke", "runs"];
        for (const k of ["status", "flow", "label", "parent", "since"] as const) {
          const v = flags[k];
          if (v !== undefined) {
            q.set(k, v);
            words.push(...opt(k, v));
          }
        }
        if (flags.held) {
          q.set("held", "true");
          words.push("--held");
        }
        words.push(...opt("limit", flags.limit));
        q.set("limit", String(flags.limit ?? 50));
        if (flags.cursor) q.set("cursor", flags.cursor);
        const page = await c.get(`/api/runs?${q.toString()}`, shapes.runs);
        // An app older than held-back runs ignores the filter and lists runs of every kind.
        if (flags.held && page.items.some((r) => r.held === undefined))
          throw new CommandError(
            `oke: the Console at ${c.url} does not filter held-back runs (an older okengine): it listed others too`,
            EXIT_REFUSED,
          );
        if (flags.json) return printJson(page);
        // Why a flow's list is empty, when the app can say (an older one sends no flowKind).
        if (flags.flow !== undefined && page.items.length === 0 && !flags.cursor) {
          if (page.flowKind === "none")
            throw new CommandError(
              `oke: no flow "${oneLine(flags.flow)}" in the app at ${c.url}, and no runs of one in its store; its durable flows: ${
                page.durableFlows?.map(oneLine).join(", ") || "none"
              }`,
              EXIT_REFUSED,
            );
          if (page.flowKind === "plain")
            return print(`no runs: flow "${oneLine(flags.flow)}" is not durable, so it keeps no runs`);
        }
        const note =
          page.flowKind === "none" && page.items.length > 0
            ? `\nflow "${oneLine(flags.flow ?? "")}" is not in the app at ${c.url} (removed or renamed?); oke status says whether a live instance runs it`
            : "";
        print(formatRuns(page, nextPage(cmd, words, page.next ?? "")) + note);
      },
    ),
  );

  withConsole(
    program
      .command("run")
      .alias("timeline")
      .description("one run: its journal as a timeline, its parent chain and children")
      .argument("<runId>", "the run")
      .option(
        "--all",
        `every journal entry (over ${TIMELINE_SHOWN.over}, the first ${TIMELINE_SHOWN.head} and the last ${TIMELINE_SHOWN.tail} are printed)`,
      ),
  ).action(
    act(async (c, runId: string, flags: ConnFlags & { all?: boolean }) => {
      // Every entry only when it is printed: the Console sends a long timeline's head and tail else.
      const whole = flags.all === true || flags.json === true;
      const d = await c.get(`/api/runs/${enc(runId)}${whole ? "?timeline=all" : ""}`, shapes.run);
      if (flags.json) printJson(d);
      else print(formatRun(d, flags.all === true));
    }),
  );

  withConsole(
    program
      .command("wake")
      .description("wake a sleeping run now (its sleep ends early)")
      .argument("<runId>", "the sleeping run"),
  ).action(
    act(async (c, runId: string, flags: ConnFlags) => {
      const res = await c.post(
        `/api/runs/${enc(runId)}/wake`,
        undefined,
        ((v) => isObj(v) && isStr(v.outcome)) as Shape<{ outcome: string }>,
      );
      if (flags.json) printJson(res);
      if (res.outcome !== "resumed") {
        if (!flags.json) print(await wokeLater(c, runId));
        return;
      }
      if (!flags.json) print(`woke ${runId}: resumed`);
      // A resume whose replay finds the journal no longer matches the code gives the run back held
      // (OKE1301) at once: read it again, so "resumed" is not the last word on a run that waits.
      const held = await heldAfterWake(c, runId);
      if (held !== undefined) throw held;
    }),
  );

  withConsole(
    program
      .command("terminate")
      .description(
        "end a durable run for good: failed with OKE1339, its undos not run (not while someone holds it)",
      )
      .argument("<runId>", "the run (sleeping, held back, or running with no live lease)")
      .option("--reason <text>", "why, kept in the run's error and the audit log (at most 500 characters)"),
  ).action(
    act(async (c, runId: string, flags: ConnFlags & { reason?: string }) => {
      const res = await c.post(
        `/api/runs/${enc(runId)}/terminate`,
        flags.reason === undefined ? undefined : { reason: flags.reason },
        ((v) => isObj(v) && v.outcome === "terminated" && isObj(v.run)) as Shape<{
          outcome: "terminated";
          run: RunRow;
          /** The message a durable consumer's run was working (absent from an older app, or for other runs). */
          message?: { id: string; signal: string; outcome: string };
        }>,
      );
      if (flags.json) printJson(res);
      else {
        const e = res.run.error;
        print(
          `terminated ${runId}: ${res.run.status}${e ? ` with ${e.code ?? ""} (${oneLine(e.message ?? "")})` : ""}; its undos did not run`,
        );
        if (res.message !== undefined) print(terminatedMessageLine(res.message));
      }
    }),
  );

  const replays = withConsole(
    program.command("replays").description("paced replays (replay --rate): list them; stop one"),
  ).action(
    act(async (c, flags: ConnFlags, cmd: Command) => {
      unknownSubcommand(cmd);
      const res = await c.get("/api/replays", shapes.replays);
      if (flags.json) printJson(res);
      else print(formatReplays(res.jobs));
    }),
  );
  withConsole(
    replays
      .command("stop")
      .description("end a paced replay: nothing more is sent, what was replayed stays")
      .argument("<job>", "the job's id (oke replays lists them)"),
  ).action(
    act(async (c, job: string, flags: ConnFlags) => {
      const r = await c
        .post(`/api/replays/${enc(job)}/stop`, undefined, shapes.replayStop)
        .catch((e: unknown) => {
          // The Console's answer names its API for API users; said here with the command that lists them.
          if (e instanceof CommandError && e.answer?.status === 404 && e.answer.code === "OKE1606")
            throw new CommandError(
              `oke: no replay job ${JSON.stringify(job)} (oke replays lists them) (404 OKE1606)`,
              e.exitCode,
              e.answer,
            );
          throw e;
        });
      if (flags.json) printJson(r);
      else
        print(
          r.stopped
            ? `stopped replay job ${r.job.id} of ${r.job.signal}: ${r.job.replayed} of ${r.job.total} replayed`
            : `replay job ${r.job.id} of ${r.job.signal} had already ended (${r.job.state}): ${r.job.replayed} of ${r.job.total} replayed`,
        );
    }),
  );

  const schedules = withConsole(
    program
      .command("schedules")
      .description("schedules (clocks): list them; pause, resume, trigger, edit or reset one"),
  ).action(
    act(async (c, flags: ConnFlags, cmd: Command) => {
      unknownSubcommand(cmd);
      const res = await c.get("/api/schedules", shapes.schedules);
      if (flags.json) printJson(res);
      else print(formatSchedules(res.schedules));
    }),
  );
  for (const [verb, what, past] of [
    ["pause", "stop firing it until resumed", "paused"],
    ["resume", "fire it again from its next slot", "resumed"],
    ["reset", "drop an operator edit: the spec in the code applies again", "reset"],
  ] as const) {
    withConsole(schedules.command(verb).description(what).argument("<name>", "the schedule")).action(
      act(async (c, name: string, flags: ConnFlags) => {
        const s = await c
          .post(`/api/schedules/${enc(name)}/${verb}`, undefined, shapes.schedule)
          .catch(scheduleNotFound);
        if (flags.json) printJson(s);
        else print(scheduleLine(past, s));
      }),
    );
  }
  withConsole(
    schedules.command("trigger").description("fire it once now").argument("<name>", "the schedule"),
  ).action(
    act(async (c, name: string, flags: ConnFlags) => {
      const r = await c
        .post(
          `/api/schedules/${enc(name)}/trigger`,
          undefined,
          ((v) => isObj(v) && isStr(v.messageId)) as Shape<{ messageId: string }>,
        )
        .catch(scheduleNotFound);
      if (flags.json) printJson(r);
      else print(`triggered ${name}: message ${r.messageId}`);
    }),
  );
  withConsole(
    schedules
      .command("edit")
      .description("change when it fires (clocks declared overridable: true)")
      .argument("<name>", "the schedule")
      .option("--cron <cron>", 'a new cron, e.g. "0 7 * * *"')
      .option("--every <interval>", 'a new interval, e.g. "1h"')
      .option("--timezone <zone>", 'a new IANA zone, e.g. "Europe/Paris"'),
  ).action(
    act(async (c, name: string, flags: ConnFlags & { cron?: string; every?: string; timezone?: string }) => {
      const edit: Record<string, string> = {};
      for (const k of ["cron", "every", "timezone"] as const) if (flags[k] !== undefined) edit[k] = flags[k];
      if (Object.keys(edit).length === 0) throw usage("schedules edit needs --cron, --every or --timezone");
      const s = await c
        .post(`/api/schedules/${enc(name)}/edit`, edit, shapes.schedule)
        .catch(scheduleNotFound);
      if (flags.json) printJson(s);
      else print(scheduleLine("edited", s));
    }),
  );
  // Set after their subcommands were added (which inherit the setting): a word that is none of them
  // reaches the action, which names the subcommands, instead of commander's "too many arguments".
  replays.allowExcessArguments(true);
  schedules.allowExcessArguments(true);
}

/** `oke schedules frobnicate`: an unknown subcommand, named with the ones there are (exit 1). */
function unknownSubcommand(cmd: Command): void {
  const word = cmd.args[0];
  if (word === undefined) return;
  const subs = cmd.commands.map((c) => c.name());
  throw usage(
    `unknown subcommand "${oneLine(word)}" for oke ${cmd.name()}: ${subs.join(", ")} (oke ${cmd.name()} alone lists them)`,
  );
}

/**
 * A schedule the app does not have: the durable-sleep spec's 404 names it a "cron"; said here as the
 * schedule it is, with the command that lists them.
 */
function scheduleNotFound(e: unknown): never {
  if (e instanceof CommandError && e.answer?.code === "ClockResourceNotFoundError")
    throw new CommandError(
      `${e.message.replace(/^oke: cron "/, 'oke: schedule "')}${e.message.includes("\n  fix:") ? "" : "\n  fix: oke schedules lists them"}`,
      e.exitCode,
      e.answer,
    );
  throw e;
}
