/** The operator surface the Console calls: queues, dead letters, runs, sleepers. */
import type { Clock } from "../clock/clock.ts";
import { OkeError } from "../errors.ts";
import { broadcastQueue } from "../signal/broadcast-runtime.ts";
import type { Store } from "../store/types.ts";
import type { Registry } from "./manifest.ts";
import type { OperatorApi, Sleeper, WakeEarlyResult } from "./types.ts";

/** What the operator API reads from the app. */
export interface OperatorDeps {
  readonly registry: Pick<Registry, "signals" | "subscribers">;
  readonly store: Store;
  readonly clock: Clock;
  wakeEarly(runId: string): Promise<WakeEarlyResult>;
}

/** Builds the operator API over one app's registry and store. */
export function createOperatorApi(rt: OperatorDeps): Omit<OperatorApi, "schedules"> {
  const onceNames = (): string[] =>
    [...rt.registry.signals.values()].filter((s) => s.delivery === "once").map((s) => s.name);
  /** OKE1081, saying what the name is when it is a signal of another kind, or which once signals there are. */
  const notOnce = (name: string): OkeError => {
    const s = rt.registry.signals.get(name);
    if (s?.delivery === "broadcast")
      return new OkeError({
        code: "OKE1081",
        message: `"${name}" is a broadcast signal: it has no queue of its own (each bound flow gets a copy of each event).`,
        fix: `app.operator.copies(${JSON.stringify(name)}) gives each flow's copies: how many ran, and how many failed (deliveredFailed).`,
        status: 404,
      });
    if (s?.delivery === "live")
      return new OkeError({
        code: "OKE1081",
        message: `"${name}" is a live signal: it keeps a tape of entries, not a queue of messages.`,
        fix: "Read it with app.live() or an fx.live() route.",
        status: 404,
      });
    const names = onceNames();
    return new OkeError({
      code: "OKE1081",
      message: `No once signal named "${name}" in this app.`,
      fix:
        names.length === 0
          ? "This app declares no once signal."
          : `Its once signals: ${names.slice(0, 20).join(", ")}${names.length > 20 ? `, and ${names.length - 20} more` : ""}.`,
      status: 404,
    });
  };
  const onceSignal = (name: string): string => {
    // From JavaScript, a handle where a name belongs read as "[object Object]" in the refusal.
    if (typeof name !== "string")
      throw new TypeError(
        `app.operator takes a signal's name (a string), got ${name === null ? "null" : typeof name}: pass signal.name, or use app.pending(signal) / app.deadLetters(signal), which take the handle`,
      );
    if (rt.registry.signals.get(name)?.delivery !== "once") throw notOnce(name);
    return name;
  };
  return {
    signals: () =>
      Promise.all(
        [...rt.registry.signals.values()]
          .filter((s) => s.delivery === "once")
          .map((s) => rt.store.stats(s.name, rt.clock.now())),
      ),
    // async: a refused name rejects the promise, as the types say, instead of throwing at the call.
    stats: async (signal) => rt.store.stats(onceSignal(signal), rt.clock.now()),
    copies: async (signal) => {
      const s = rt.registry.signals.get(signal);
      if (s?.delivery !== "broadcast")
        throw new OkeError({
          code: "OKE1081",
          message: `No broadcast signal named "${signal}" in this app.`,
          status: 404,
        });
      const flows = (rt.registry.subscribers.get(signal) ?? []).map((f) => f.name!);
      return Promise.all(
        flows.map(async (flow) => ({
          ...(await rt.store.stats(broadcastQueue(signal, flow), rt.clock.now())),
          flow,
        })),
      );
    },
    deadLetters: async (signal, limit) =>
      (await rt.store.deadLetters(onceSignal(signal), limit)).map((m) => ({
        id: m.id,
        payload: m.payload,
        attempts: m.attempts,
        failures: m.failures,
        key: m.key,
        createdAt: m.createdAt,
        status: "dead" as const,
      })),
    pending: async (signal, limit = 100) => {
      if (!Number.isSafeInteger(limit) || limit < 1)
        throw new TypeError(`operator.pending: limit must be a positive integer, got ${String(limit)}`);
      const page = await rt.store.pageMessages({ signal: onceSignal(signal), status: "pending", limit });
      return page.items.map((m) => ({
        id: m.id,
        payload: m.payload,
        key: m.key,
        attempts: m.attempts,
        createdAt: m.createdAt,
        status: "pending" as const,
      }));
    },
    replay: async (signal, ids) => rt.store.replay(onceSignal(signal), ids, rt.clock.now()),
    discard: async (signal, ids) => rt.store.discard(onceSignal(signal), ids),
    runs: (filter = {}) => rt.store.listRuns(filter),
    run: async (runId) => {
      const run = await rt.store.getRun(runId);
      if (!run) return undefined;
      return { run, journal: await rt.store.getJournal(runId) };
    },
    sleepers: async (limit = 100) => {
      const runs = await rt.store.listRuns({ status: "sleeping", limit });
      const out: Sleeper[] = [];
      for (const r of runs) {
        // A sleeper's park is its newest entry: read that one where the store can, not the journal.
        const journal =
          rt.store.getJournalEnds === undefined
            ? await rt.store.getJournal(r.id)
            : await rt.store.getJournalEnds(r.id, 0, 1).then((e) => [...e.head, ...e.tail]);
        const last = [...journal].reverse().find((e) => e.kind === "sleep");
        out.push({ runId: r.id, flow: r.flow, wakeAt: r.wakeAt ?? 0, label: last?.label });
      }
      return out.sort((a, b) => a.wakeAt - b.wakeAt);
    },
    wakeEarly: (runId) => rt.wakeEarly(runId),
  };
}
