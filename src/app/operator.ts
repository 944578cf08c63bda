/** The operator surface the Console calls: queues, dead letters, runs, sleepers. */
import type { Clock } from "../clock/clock.ts";
import { OkeError } from "../errors.ts";
import type { Store } from "../store/types.ts";
import type { Registry } from "./manifest.ts";
import type { OperatorApi, Sleeper, WakeEarlyResult } from "./types.ts";

/** What the operator API reads from the app. */
export interface OperatorDeps {
  readonly registry: Pick<Registry, "signals">;
  readonly store: Store;
  readonly clock: Clock;
  wakeEarly(runId: string): Promise<WakeEarlyResult>;
}

/** Builds the operator API over one app's registry and store. */
export function createOperatorApi(rt: OperatorDeps): Omit<OperatorApi, "schedules"> {
  const onceSignal = (name: string): string => {
    const s = rt.registry.signals.get(name);
    if (!s || s.delivery !== "once") {
      throw new OkeError({
        code: "OKE1081",
        message: `No once signal named "${name}" in this app.`,
        status: 404,
      });
    }
    return name;
  };
  return {
    signals: () =>
      Promise.all(
        [...rt.registry.signals.values()]
          .filter((s) => s.delivery === "once")
          .map((s) => rt.store.stats(s.name, rt.clock.now())),
      ),
    stats: (signal) => rt.store.stats(onceSignal(signal), rt.clock.now()),
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
    replay: (signal, ids) => rt.store.replay(onceSignal(signal), ids, rt.clock.now()),
    discard: (signal, ids) => rt.store.discard(onceSignal(signal), ids),
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
        const journal = await rt.store.getJournal(r.id);
        const last = [...journal].reverse().find((e) => e.kind === "sleep");
        out.push({ runId: r.id, flow: r.flow, wakeAt: r.wakeAt ?? 0, label: last?.label });
      }
      return out.sort((a, b) => a.wakeAt - b.wakeAt);
    },
    wakeEarly: (runId) => rt.wakeEarly(runId),
  };
}
