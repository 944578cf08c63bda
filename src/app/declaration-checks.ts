// Boot checks across declarations: effects that name signals the app lacks (an error), signals nobody consumes (a warning).
import { OkeError } from "../errors.ts";
import type { Logger } from "../log/logger.ts";
import type { AnyFlow } from "../flow/flow.ts";
import type { SignalHandle } from "../signal/signal.ts";

/** The part of the Registry these checks read (declared here so manifest.ts is not imported back). */
interface Declared {
  flows: ReadonlyMap<string, AnyFlow>;
  signals: ReadonlyMap<string, SignalHandle>;
  subscribers: ReadonlyMap<string, readonly AnyFlow[]>;
}

/**
 * `effects.emits: ["orders.placed"]` and `effects.reads: ["signal:orders.placed"]`
 * must name a signal the app declares: a typo there would make the manifest
 * (and the Console) describe an app that does not exist. Other read resources
 * (not `signal:`) are not signals and are not checked here.
 */
export function checkEffectSignals(registry: Declared): void {
  const known = [...registry.signals.keys()].sort();
  for (const f of registry.flows.values()) {
    const named: Array<{ where: string; signal: string }> = [
      ...f.effects.emits.map((s) => ({ where: "effects.emits", signal: s })),
      ...f.effects.reads
        .filter((r) => r.startsWith("signal:"))
        .map((r) => ({ where: "effects.reads", signal: r.slice("signal:".length) })),
    ];
    for (const { where, signal } of named) {
      if (registry.signals.has(signal)) continue;
      throw new OkeError({
        code: "OKE1082",
        message: `Flow "${f.name ?? "(unnamed)"}" declares ${where} "${signal}", but the app declares no signal "${signal}".`,
        fix:
          known.length === 0
            ? `Declare it (signal.once("${signal}", …) in src/signals/) or correct the name.`
            : `Declare it (signal.once("${signal}", …) in src/signals/) or correct the name; the app declares ${known.join(", ")}.`,
        details: { flow: f.name, effect: where, signal },
      });
    }
  }
}

/**
 * Once and broadcast signals that are not `optional` and have no flow bound in
 * this app: say at boot what their emits will do instead of at the first emit.
 * A once emit checks this app's bindings, so every emit fails with OKE1240. A
 * broadcast emit checks the fleet's live subscribers, so an emitter-only app
 * (its flows run on other instances) is fine, and the line says so. Live
 * signals feed browsers, not flows, and are left out.
 */
export function warnUnconsumedSignals(registry: Declared, logger: Logger): void {
  for (const s of registry.signals.values()) {
    if (s.optional || s.delivery === "live" || (registry.subscribers.get(s.name)?.length ?? 0) > 0) continue;
    logger.warn(
      { signal: s.name, delivery: s.delivery },
      s.delivery === "broadcast"
        ? `signal "${s.name}" has no flow bound to it in this app, so its emits fail (OKE1240) unless another instance of the fleet runs one: bind one with on(signal, flow(…)), or declare it optional: true`
        : `signal "${s.name}" has no flow bound to it, so every emit of it fails (OKE1240): bind one with on(signal, flow(…)), or declare it optional: true`,
    );
  }
}
