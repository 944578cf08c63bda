/** Stranded work: runs, messages and clock slots no live instance can take, for the Console's overview and the dev boot's warnings. */
import { clockSignalName } from "../clock/schedule.ts";
import { baseOf } from "../clock/schedule-runtime.ts";
import { compiledSpec } from "../clock/schedule-spec.ts";
import { broadcastQueue } from "../signal/broadcast-runtime.ts";
import { effectiveSpec, type ScheduleRecord } from "../store/schedule-types.ts";
import type { RunStatus } from "../store/types.ts";
import { ALIVE_MS } from "./heartbeat.ts";
import type { ConsoleHost } from "./host.ts";
import { oneLine, plural, shellWord } from "./words.ts";

/** Run statuses that still need an instance with the run's flow. */
export const WAITING_RUNS: readonly RunStatus[] = ["running", "sleeping", "compensating"];
/**
 * The overview's rule for runs, one run at a time: it still needs an instance with its flow (running,
 * sleeping or compensating), and no live instance has that flow.
 */
export const strandedRun = (
  run: { flow: string; status: RunStatus },
  liveFlows: ReadonlySet<string>,
): boolean => WAITING_RUNS.includes(run.status) && !liveFlows.has(run.flow);

/** Stranded flows whose earliest deadline the overview looks up (one indexed read each). */
const STRANDED_DEADLINES = 20;

/** Queues of broadcast copies (`~broadcast:<signal>:<flow>`): the janitor clears them, never stranded. */
export const BROADCAST_QUEUE_PREFIX = broadcastQueue("", "").slice(0, -1);

/**
 * Work no live instance can do: runs of flows, pending messages of once signals, and due slots of
 * clocks, that no instance heard from in the last 30 s lists (a flow removed or renamed by a deploy, a
 * worker removed, only web instances left). Nobody claims them — every claim is filtered to the
 * claimer's own flows and pools, and only an instance that declares a clock fires it — so they wait,
 * untouched, until an instance that has them comes back.
 *
 * Both come from the store, not from this app's manifest: flows from the run counts the overview
 * reads anyway, signals from the store's backlog (every queue with pending or inflight messages), so
 * a signal removed from the code entirely — its worker and its declaration gone — is still seen.
 * Broadcast copies are left out: copies of a flow without live subscribers expire and the janitor
 * clears them (broadcast-runtime.ts).
 */
export async function strandedView(
  host: ConsoleHost,
  counts: Awaited<ReturnType<ConsoleHost["store"]["runCounts"]>>,
  instances: ReadonlyArray<{ flows: readonly string[]; signals: readonly string[] }>,
  schedules: readonly ScheduleRecord[],
  now: number,
) {
  // No heartbeat at all (a Console run from a script, a fleet still booting): nothing can be told
  // apart, and flagging every run and message would be noise.
  if (instances.length === 0) return { checked: false, flows: [], signals: [], clocks: [] };
  const liveFlows = new Set(instances.flatMap((i) => i.flows));
  const liveSignals = new Set(instances.flatMap((i) => i.signals));
  const byFlow = new Map<string, Partial<Record<RunStatus, number>>>();
  for (const c of counts) {
    if (c.count === 0 || !strandedRun(c, liveFlows)) continue;
    const runs = byFlow.get(c.flow) ?? {};
    runs[c.status] = (runs[c.status] ?? 0) + c.count;
    byFlow.set(c.flow, runs);
  }
  const flows = [];
  // One after the other: a burst of reads would take as many pool connections from the app.
  for (const name of [...byFlow.keys()].sort())
    flows.push({
      name,
      runs: byFlow.get(name)!,
      // The earliest wake time or lease expiry among them: overdue since then when in the past.
      dueAt: flows.length < STRANDED_DEADLINES ? await host.store.nextWakeAt({ flows: [name] }) : null,
    });
  const declared = new Set(host.manifest.signals.map((s) => s.name));
  const stranded = [];
  for (const b of await host.store.queueBacklog()) {
    if (b.signal.startsWith(BROADCAST_QUEUE_PREFIX) || liveSignals.has(b.signal)) continue;
    // Inflight messages count once their lease lapsed: until then a stopped instance may still settle them.
    const lease = b.earliestLeaseExpiry;
    const leaseLapsedAt = lease !== null && lease <= now ? lease : null;
    if (b.pending === 0 && leaseLapsedAt === null) continue;
    stranded.push({
      name: b.signal,
      pending: b.pending,
      inflight: b.inflight,
      leaseLapsedAt,
      oldestPendingAgeMs:
        b.oldestPendingCreatedAt === null ? null : Math.max(0, now - b.oldestPendingCreatedAt),
      // false: the Console's app does not declare it (removed from the code, or only another app's):
      // its messages can be read and its dead letters discarded here, not replayed.
      declared: declared.has(b.signal),
    });
  }
  return { checked: true, flows, signals: stranded, clocks: strandedClocks(schedules, liveSignals, now) };
}

/** What to do about a clock nothing fires: the same words on the page, in the API and in `oke status`. */
export const STRANDED_CLOCK_FIX =
  "Deploy an instance whose code declares this clock: it fires the latest missed slot once at boot (missedRuns counts the others). " +
  "If the clock was removed from the code on purpose, pause it: the next boot of the app marks it orphaned.";

/**
 * Clocks that are active (neither paused nor orphaned), have a slot due, and that no live instance
 * declares: only an instance that declares a clock fires it, so once all of them are gone the clock
 * still reads `active` and nothing fires it until it is deployed again or a boot orphans it
 * (docs/clock.md). An instance declares clock `x` exactly when it runs a pool for its once signal
 * `clock:x`, which its heartbeat lists among its `signals`. One store read (the schedules) beside the
 * heartbeats the overview reads anyway; the due slot is the runtime's own spec arithmetic, one step
 * per clock (never the count of missed slots, which walks a frequent cron slot by slot).
 */
export function strandedClocks(
  schedules: readonly ScheduleRecord[],
  liveSignals: ReadonlySet<string>,
  now: number,
) {
  const out = [];
  for (const r of schedules) {
    if (r.paused || r.orphaned || liveSignals.has(clockSignalName(r.name))) continue;
    const spec = effectiveSpec(r);
    // The first slot after the last fire (or the anchor): nothing has fired it when it is past.
    const dueAt = compiledSpec(spec).next(baseOf(r));
    if (dueAt === null || dueAt > now) continue;
    out.push({
      name: r.name,
      flow: r.flow,
      cron: spec.cron,
      every: spec.every,
      timezone: spec.timezone,
      dueAt,
      lastFiredAt: r.lastFiredAt,
      fix: STRANDED_CLOCK_FIX,
    });
  }
  return out.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

/** The warn lines for what `strandedView` found: one per flow, signal and clock, each saying what to do. */
export function strandedWarnings(
  view: Awaited<ReturnType<typeof strandedView>>,
): Array<{ fields: Record<string, unknown>; line: string }> {
  const out: Array<{ fields: Record<string, unknown>; line: string }> = [];
  for (const f of view.flows) {
    const n = Object.values(f.runs).reduce((a, b) => a + b, 0);
    const by = WAITING_RUNS.filter((k) => (f.runs[k] ?? 0) > 0)
      .map((k) => `${k} ${f.runs[k]}`)
      .join(", ");
    const flow = shellWord(oneLine(f.name));
    out.push({
      fields: { stranded: { flow: f.name, runs: f.runs } },
      line:
        `okengine: ${plural(n, "run")} of flow ${oneLine(f.name)} ${n === 1 ? "is" : "are"} stranded (${by}): ` +
        `no live instance has this flow (renamed or removed?), so ${n === 1 ? "it waits" : "they wait"}; nothing is lost. ` +
        `List them with oke runs --flow ${flow}; deploy or restore the flow to resume them where they stopped, ` +
        "or end one with oke terminate <id>.",
    });
  }
  for (const s of view.signals) {
    const lapsed = s.leaseLapsedAt !== null ? s.inflight : 0;
    const n = s.pending + lapsed;
    const what = [
      s.pending > 0 ? `${s.pending} pending` : undefined,
      lapsed > 0 ? `${lapsed} inflight (lease lapsed)` : undefined,
    ]
      .filter((x) => x !== undefined)
      .join(" and ");
    out.push({
      fields: { stranded: { signal: s.name, pending: s.pending, inflight: lapsed } },
      line:
        `okengine: ${what} ${n === 1 ? "message" : "messages"} on signal ${oneLine(s.name)} ${n === 1 ? "is" : "are"} stranded: ` +
        `no live instance consumes this signal (its worker removed?), so ${n === 1 ? "it waits" : "they wait"}; nothing is lost. ` +
        `Restore its worker to deliver ${n === 1 ? "it" : "them"}` +
        (s.pending > 0
          ? `, or drop what is pending with oke discard ${shellWord(oneLine(s.name))} --pending --all.`
          : "."),
    });
  }
  for (const c of view.clocks) {
    const spec = c.cron !== null ? `cron ${c.cron} ${c.timezone}` : `every ${c.every ?? "?"}`;
    out.push({
      fields: { stranded: { clock: c.name, dueAt: c.dueAt } },
      line:
        `okengine: clock ${oneLine(c.name)} (${spec}) is stranded: active and due since ${new Date(c.dueAt).toISOString()}, ` +
        `but no live instance declares it, so nothing fires it; it waits. ${c.fix} (oke schedules pause ${shellWord(oneLine(c.name))})`,
    });
  }
  return out;
}

/**
 * The dev boot's check: once boot finished, one warn line per flow, signal and clock stranded by the
 * overview's rule over every live instance's heartbeat — a renamed durable flow or a removed worker
 * otherwise reboots cleanly and its runs and messages wait without a word in the log. `self` is this
 * instance as its heartbeat lists it: counted live whether or not its first beat has landed yet.
 */
export async function warnStrandedWork(
  host: ConsoleHost,
  self: { id: string; flows: readonly string[]; signals: readonly string[] },
): Promise<void> {
  const now = host.clock.now();
  const [counts, heard, schedules] = await Promise.all([
    host.store.runCounts(),
    host.store.listInstances(now - ALIVE_MS),
    host.store.listSchedules(),
  ]);
  const instances = heard.some((i) => i.id === self.id) ? heard : [...heard, self];
  const view = await strandedView(host, counts, instances, schedules, now);
  for (const w of strandedWarnings(view)) host.logger.warn(w.fields, w.line);
}
