/** Adopts a project's exports into the Registry (flows, signals, routes) and the Manifest, with the OKE10xx boot checks. */
import { isChannel, type Channel } from "../channel/channel.ts";
import { OkeError, errors } from "../errors.ts";
import { NO_EFFECTS, signalReadRef, type DeclaredEffects } from "../flow/effects.ts";
import { isFlow, withName, type AnyFlow } from "../flow/flow.ts";
import { isBinding, type Binding } from "../flow/on.ts";
import { isSignal, signal, type Delivery, type SignalHandle } from "../signal/signal.ts";
import { adoptClock, clockSignalOptions, type BoundClock } from "../clock/bind-clock.ts";
import { checkEffectSignals } from "./declaration-checks.ts";
import { defaultFlowName, fileRoutePath, restParamOf } from "./file-routes.ts";
import type { HttpRoute } from "../http/types.ts";

/** One loaded source file: its path relative to the project root (for file-tree routes and names) and its exports. */
export interface ModuleInput {
  /** e.g. "src/flows/trials/start.ts". Omit for modules built in code; their bindings then need explicit names/paths. */
  path?: string;
  exports: Record<string, unknown>;
  /**
   * What each export's source does, read by `oke` from the file (src/project/source-effects.ts):
   * the Manifest records it for flows without hand-written `effects`.
   */
  sourceEffects?: Record<string, SourceEffects>;
  /**
   * Exports this file takes from another module (`export * from`, `export { x } from`, an
   * imported name exported again), read by `oke` from the file. A binding, flow or signal
   * takes its route, name and source from a file that declares it, never from a barrel.
   */
  reexports?: readonly string[];
}

/** Signals an export's code emits (`fx.emit(handle, …)`) and whose dead letters it reads. */
export interface SourceEffects {
  emits: readonly SignalHandle[];
  reads: readonly SignalHandle[];
}

export interface ManifestFlow {
  name: string;
  durable: boolean;
  description?: string;
  /** "src/flows/trials/start.ts#start" when adopted from a file. */
  source?: string;
  /** Triggers bound to it: "POST /trials/start", "signal:tasks.email", "clock:reports.daily". */
  triggers: string[];
  effects: DeclaredEffects;
}

export interface ManifestSignal {
  name: string;
  delivery: Delivery;
  retries?: number;
  deadLetter?: boolean;
  optional: boolean;
  description: string;
  hasSchema: boolean;
  /** Flows bound to it. */
  flows: string[];
}

/** A clock bound to a flow: when it fires, and how. */
export interface ManifestClock {
  name: string;
  /** The flow it fires. */
  flow: string;
  /** Exactly one of `cron` and `every` is set, as declared. */
  cron: string | null;
  every: string | null;
  timezone: string;
  /** Whether a slot may start while an earlier slot's flow still runs. */
  overlap: boolean;
  /** Whether an operator may edit its cron/every/timezone. */
  overridable: boolean;
  retries: number;
  deadLetter: boolean;
  description?: string;
  /** The once signal its fires travel on (dead letters and the Console list it under this name). */
  signal: string;
}

export interface ManifestChannel {
  name: string;
  driver?: string;
  description: string;
}

/** Everything an app is made of, as plain JSON (`oke manifest`). */
export interface Manifest {
  flows: ManifestFlow[];
  routes: HttpRoute[];
  signals: ManifestSignal[];
  /** Schedules (`clock(...)`, `every(...)`) with the flow each fires. */
  clocks: ManifestClock[];
  channels: ManifestChannel[];
}

/** The adopted declarations, resolved to live objects, that the runtimes use. */
export interface Registry {
  flows: Map<string, AnyFlow>;
  /** Original flow object → its (possibly defaulted) named copy. */
  named: Map<AnyFlow, AnyFlow>;
  signals: Map<string, SignalHandle>;
  /** Signal name → flows bound to it. */
  subscribers: Map<string, AnyFlow[]>;
  /**
   * `restParam`: the name of a file-tree catch-all (`files/[...slug].ts` → "slug"). The router
   * reports the rest of the path as `*`; namedParams (file-routes.ts) renames it for the input.
   */
  routes: Array<HttpRoute & { flowRef: AnyFlow; in: AnyFlow["in"]; restParam?: string }>;
  channels: Map<string, Channel>;
  /** Clocks bound to flows (each fires on its own once signal `clock:<name>`). */
  clocks: Map<string, BoundClock>;
  manifest: Manifest;
}

interface Found {
  path: string | undefined;
  exportName: string;
  value: unknown;
  /** The module exports it but declares it elsewhere (a barrel's `export * from`). */
  reexport: boolean;
  /** What the export's source emits and reads (`oke` reads it from the file). */
  recorded?: SourceEffects;
}

const MODULE_KEYS = new Set(["path", "exports", "sourceEffects", "reexports"]);

const normalizeModules = (modules: ReadonlyArray<ModuleInput | Record<string, unknown>>): ModuleInput[] =>
  modules.map((m) =>
    typeof m.exports === "object" &&
    m.exports !== null &&
    (m.path === undefined || typeof m.path === "string") &&
    Object.keys(m).every((k) => MODULE_KEYS.has(k))
      ? (m as ModuleInput)
      : { exports: m as Record<string, unknown> },
  );

const bootError = (code: string, message: string, fix?: string) => new OkeError({ code, message, fix });

/**
 * Adopts what modules export (bindings, flows, signals, channels), names
 * flows, derives routes and validates the whole at boot: OKE1071 (two flows on
 * one once signal), OKE1072 (unnamed signal flow), duplicate routes, names and
 * conflicting signal declarations.
 */
export function buildRegistry(input: ReadonlyArray<ModuleInput | Record<string, unknown>>): Registry {
  const declared: Found[] = [];
  const reexported: Found[] = [];
  for (const mod of normalizeModules(input)) {
    const reexports = new Set(mod.reexports ?? []);
    for (const [exportName, value] of Object.entries(mod.exports)) {
      const reexport = reexports.has(exportName);
      (reexport ? reexported : declared).push({
        path: mod.path,
        exportName,
        value,
        reexport,
        recorded: mod.sourceEffects?.[exportName],
      });
    }
  }
  // The first place a value is found names it (route, flow name, source), so the files that
  // declare it come before the barrels that re-export it, whatever the alphabet says.
  const found = [...declared, ...reexported];
  const whereOf = (at: Found): string => (at.path ? `${at.path}#${at.exportName}` : "a module built in code");
  /** Where each exported signal or channel is declared, for OKE1073/OKE1077. */
  const declaredAt = new Map<unknown, string>();
  for (const at of found)
    if ((isSignal(at.value) || isChannel(at.value)) && !declaredAt.has(at.value))
      declaredAt.set(at.value, whereOf(at));

  const flows = new Map<string, AnyFlow>();
  const named = new Map<AnyFlow, AnyFlow>();
  const sources = new Map<AnyFlow, string>();
  const signals = new Map<string, SignalHandle>();
  const channels = new Map<string, Channel>();
  const seenBindings = new Set<Binding>();
  const bindings: Array<{ binding: Binding; at: Found }> = [];

  /** Where the adopted signal of each name comes from. */
  const signalAt = new Map<string, string>();
  const adoptSignal = (s: SignalHandle, usedAt: string): void => {
    const prev = signals.get(s.name);
    const at = declaredAt.get(s) ?? usedAt;
    if (prev && prev !== s) {
      const diff = differingOption(prev, s, SIGNAL_OPTIONS);
      if (diff !== undefined) {
        throw new OkeError({
          code: "OKE1073",
          message: `Signal "${s.name}" is declared twice with different ${diff.option}: ${diff.a} in ${signalAt.get(s.name)!}, ${diff.b} in ${at}.`,
          fix: `Declare "${s.name}" once (in src/signals/) and import that handle wherever it is bound or emitted.`,
          details: { signal: s.name, option: diff.option, files: [signalAt.get(s.name)!, at] },
        });
      }
    }
    if (!prev) {
      signals.set(s.name, s);
      signalAt.set(s.name, at);
    }
  };

  const nameFlow = (
    f: AnyFlow,
    at: Found | undefined,
    required: string | undefined,
    routePath?: string,
  ): AnyFlow => {
    const existing = named.get(f);
    if (existing) return existing;
    let name = f.name;
    if (name === undefined) {
      if (required !== undefined)
        throw errors.unnamedSignalFlow(required, at ? `exported as ${whereOf(at)}` : "a flow built in code");
      if (!at?.path && routePath !== undefined) {
        // Built in code with an explicit path: "/orders/:id/cancel" → "orders.id.cancel".
        name =
          routePath
            .split("/")
            .filter(Boolean)
            .map((p) => p.replace(/^:/, ""))
            .join(".") || "index";
      } else if (!at?.path) {
        throw bootError(
          "OKE1076",
          `A flow exported as "${at?.exportName ?? "?"}" has no name and no source file to name it after.`,
          'Pass a name: flow("orders.create", { ... }).',
        );
      } else name = defaultFlowName(at.path, at.exportName);
    }
    const owner = flows.get(name);
    if (owner && owner !== f) {
      throw bootError(
        "OKE1075",
        `Two different flows are named "${name}" (${sources.get(owner) ?? "a flow built in code"} and ${at?.path ? `${at.path}#${at.exportName}` : "a flow built in code"}).`,
        `Name one of them explicitly where it is declared: flow("${name.split(".")[0]!}.<other-name>", { ... }).`,
      );
    }
    // Without hand-written effects the flow gets what its source does (and those signals are the app's).
    const recorded = f.effects === NO_EFFECTS ? at?.recorded : undefined;
    for (const s of [...(recorded?.emits ?? []), ...(recorded?.reads ?? [])])
      adoptSignal(s, `the code of ${at ? whereOf(at) : name}`);
    const copy =
      recorded !== undefined
        ? withName(f, name, {
            ...NO_EFFECTS,
            emits: recorded.emits.map((s) => s.name).sort(),
            reads: recorded.reads.map(signalReadRef).sort(),
          })
        : f.name === name
          ? f
          : withName(f, name);
    flows.set(name, copy);
    named.set(f, copy);
    named.set(copy, copy);
    if (at?.path) sources.set(copy, `${at.path}#${at.exportName}`);
    return copy;
  };

  // Bindings first: a flow exported both bare and bound takes its name from the binding's file.
  for (const at of found) {
    if (isBinding(at.value) && !seenBindings.has(at.value)) {
      seenBindings.add(at.value);
      bindings.push({ binding: at.value, at });
    }
  }
  const subscribers = new Map<string, AnyFlow[]>();
  const httpBindings: Array<{ binding: Binding; at: Found; flow: AnyFlow }> = [];
  const clocks = new Map<string, BoundClock>();
  for (const { binding, at } of bindings) {
    const t = binding.trigger;
    if (t.kind === "clock") {
      const f = nameFlow(binding.flow, at, undefined);
      const { name, ...options } = clockSignalOptions(adoptClock(clocks, t, f.name!));
      const s = signal.once(name, options);
      adoptSignal(s, `the clock of ${whereOf(at)}`);
      subscribers.set(s.name, [f]);
    } else if (t.kind === "signal") {
      adoptSignal(t, `the binding ${whereOf(at)}`);
      const f = nameFlow(binding.flow, at, t.name);
      const list = subscribers.get(t.name) ?? [];
      if (!list.includes(f)) list.push(f);
      subscribers.set(t.name, list);
    } else {
      httpBindings.push({ binding, at, flow: nameFlow(binding.flow, at, undefined, t.path) });
    }
  }
  for (const at of found) {
    if (isFlow(at.value)) nameFlow(at.value, at, undefined);
    else if (isSignal(at.value)) adoptSignal(at.value, whereOf(at));
    else if (isChannel(at.value)) {
      const c = at.value;
      const prev = channels.get(c.name);
      const diff = prev && prev !== c ? differingOption(prev, c, CHANNEL_OPTIONS) : undefined;
      if (diff !== undefined) {
        const first = declaredAt.get(prev)!;
        throw new OkeError({
          code: "OKE1077",
          message: `Channel "${c.name}" is declared twice with different ${diff.option}: ${diff.a} in ${first}, ${diff.b} in ${whereOf(at)}.`,
          fix: `Declare "${c.name}" once and import that channel wherever it is sent to.`,
          details: { channel: c.name, option: diff.option, files: [first, whereOf(at)] },
        });
      }
      if (!prev) channels.set(c.name, c);
    }
  }

  for (const [signalName, list] of subscribers) {
    const s = signals.get(signalName)!;
    if (s.delivery === "once" && list.length > 1)
      throw errors.onceBoundTwice(
        signalName,
        list.map((f) => f.name!),
      );
    if (s.delivery === "live") {
      throw bootError(
        "OKE1078",
        `Live signal "${signalName}" cannot have worker flows (${list.map((f) => f.name!).join(", ")}).`,
        "Live signals feed browsers; use signal.once or signal.broadcast for workers.",
      );
    }
  }

  const routes: Registry["routes"] = [];
  const routeOwner = new Map<string, { flow: string; at: string }>();
  for (const { binding, at, flow } of httpBindings) {
    const t = binding.trigger;
    if (t.kind !== "http") continue;
    const path = t.path ?? routeFromFile(flow.name!, at);
    const key = `${t.method} ${normalizeRouteKey(path)}`;
    const where = `"${flow.name!}"${at.path ? ` (${at.path}#${at.exportName})` : ""}`;
    const owner = routeOwner.get(key);
    if (owner !== undefined && owner.flow !== flow.name) {
      throw bootError(
        "OKE1074",
        `Duplicate route ${t.method} ${path}: bound by flows ${owner.at} and ${where}.`,
        `Give one of them an explicit path (http.${t.method.toLowerCase()}("/…")) or move it to another file.`,
      );
    }
    if (owner === undefined) {
      routeOwner.set(key, { flow: flow.name!, at: where });
      const restParam = t.path === undefined && at.path ? restParamOf(at.path) : undefined;
      routes.push({
        method: t.method,
        path,
        flow: flow.name!,
        flowRef: flow,
        in: flow.in ?? t.in,
        ...(restParam === undefined ? {} : { restParam }),
      });
    }
  }
  routes.sort((a, b) => a.path.localeCompare(b.path) || a.method.localeCompare(b.method));

  const triggersOf = new Map<string, string[]>();
  const addTrigger = (flowName: string, t: string): void => {
    triggersOf.set(flowName, [...(triggersOf.get(flowName) ?? []), t]);
  };
  for (const r of routes) addTrigger(r.flow, `${r.method} ${r.path}`);
  const clockBySignal = new Map([...clocks.values()].map((c) => [clockSignalOptions(c).name, c]));
  for (const [s, list] of subscribers)
    for (const f of list) {
      const c = clockBySignal.get(s);
      addTrigger(f.name!, c === undefined ? `signal:${s}` : `clock:${c.name}`);
    }

  const manifest: Manifest = {
    flows: [...flows.values()]
      .map((f) => ({
        name: f.name!,
        durable: f.durable,
        ...(f.description === undefined ? {} : { description: f.description }),
        ...(sources.has(f) ? { source: sources.get(f)! } : {}),
        triggers: triggersOf.get(f.name!) ?? [],
        effects: f.effects,
      }))
      .sort((a, b) => a.name.localeCompare(b.name)),
    routes: routes.map(({ method, path, flow }) => ({ method, path, flow })),
    signals: [...signals.values()]
      .map((s) => ({
        name: s.name,
        delivery: s.delivery,
        ...(s.delivery === "once" ? { retries: s.retries, deadLetter: s.deadLetter } : {}),
        optional: s.optional,
        description: s.description,
        hasSchema: s.schema !== undefined,
        flows: (subscribers.get(s.name) ?? []).map((f) => f.name!),
      }))
      .sort((a, b) => a.name.localeCompare(b.name)),
    clocks: [...clocks.values()]
      .map((c) => ({
        name: c.name,
        flow: c.flow,
        cron: c.schedule.spec.cron,
        every: c.schedule.spec.every,
        timezone: c.schedule.spec.timezone,
        overlap: c.schedule.overlap,
        overridable: c.schedule.overridable,
        retries: c.schedule.retries,
        deadLetter: c.schedule.deadLetter,
        ...(c.schedule.description === undefined ? {} : { description: c.schedule.description }),
        signal: clockSignalOptions(c).name,
      }))
      .sort((a, b) => a.name.localeCompare(b.name)),
    channels: [...channels.values()]
      .map((c) => ({ name: c.name, ...(c.driver ? { driver: c.driver } : {}), description: c.description }))
      .sort((a, b) => a.name.localeCompare(b.name)),
  };
  checkEffectSignals({ flows, signals, subscribers });
  return { flows, named, signals, subscribers, routes, channels, clocks, manifest };
}

const SIGNAL_OPTIONS = [
  "delivery",
  "schema",
  "retries",
  "deadLetter",
  "optional",
  "retention",
  "description",
];
const CHANNEL_OPTIONS = ["schema", "driver", "url", "timeoutMs", "description"];

const showOption = (key: string, v: unknown): string =>
  key === "schema" ? (v === undefined ? "no schema" : "a schema") : `${key} ${JSON.stringify(v) ?? "unset"}`;

/**
 * The first option two declarations of one name disagree on, or undefined when they agree.
 * Schemas agree only when they are the same object: two schemas that print alike
 * (`z.number().min(1)` and `z.number().max(10)`) may still accept different payloads.
 */
function differingOption(
  a: object,
  b: object,
  keys: readonly string[],
): { option: string; a: string; b: string } | undefined {
  for (const key of keys) {
    const va = (a as Record<string, unknown>)[key];
    const vb = (b as Record<string, unknown>)[key];
    if (key === "schema" ? va === vb : JSON.stringify(va) === JSON.stringify(vb)) continue;
    if (key === "schema" && va !== undefined && vb !== undefined)
      return { option: "schemas", a: "one schema object", b: "another" };
    return { option: key === "schema" ? "schemas" : key, a: showOption(key, va), b: showOption(key, vb) };
  }
  return undefined;
}

/** The tree's route for a pathless HTTP binding, or a boot error saying why there is none. */
function routeFromFile(flowName: string, at: Found): string {
  if (!at.path) {
    throw bootError(
      "OKE1079",
      `HTTP flow "${flowName}" has no path and no source file to derive one from.`,
      'Pass a path: http.get("/orders").',
    );
  }
  const path = fileRoutePath(at.path);
  if (path === undefined) {
    throw bootError(
      "OKE1079",
      `HTTP flow "${flowName}" (${at.path}#${at.exportName}) has no path, and its file is never a route (names starting with "_", shapes.ts, signals.ts and generated.ts are not).`,
      'Pass a path: http.get("/orders"), or move the binding to a route file.',
    );
  }
  return path;
}

/** `/users/:id` and `/users/:userId` are the same route. */
const normalizeRouteKey = (path: string): string => path.replace(/:\w+/g, ":").replace(/\/+$/, "") || "/";
