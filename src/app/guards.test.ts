// Unknown options are refused by name: createApp, defineConfig, flow, signal and http helpers.
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import {
  createApp,
  createTimeTravel,
  defineConfig,
  flow,
  http,
  on,
  signal,
  type Fx,
  type OkeError,
} from "../index.ts";
import { createMemoryStore } from "../store/memory/memory-store.ts";

/** A dev app on the memory store whose log lines land in `lines` (JSON objects). */
function devApp(modules: Array<Record<string, unknown>>) {
  const lines: Array<{ level: number; msg: string } & Record<string, unknown>> = [];
  const logger = pino({ level: "info" }, { write: (l: string) => void lines.push(JSON.parse(l)) });
  const app = createApp({
    env: "dev",
    modules,
    store: createMemoryStore(),
    logger,
    clock: createTimeTravel(0),
  });
  const warnings = () => lines.filter((l) => l.level === 40).map((l) => l.msg);
  return { app, warnings };
}

const thrown = (fn: () => unknown): OkeError => {
  try {
    fn();
  } catch (e) {
    return e as OkeError;
  }
  throw new Error("expected a throw");
};

// Type-level: `npm run typecheck` compiles this file, so each line below must stay a type error.
export const typeErrors = (fx: Fx): Array<Promise<void>> => [
  // @ts-expect-error -- "5 seconds" is not a duration
  fx.clock.sleep("cooldown", "5 seconds"),
  // @ts-expect-error -- the duration is missing: "8h" would be the label
  fx.clock.sleep("8h"),
  // @ts-expect-error -- not an integer: the grammar reads it as 0 ms
  fx.clock.sleep("cooldown", "1.5h"),
  // @ts-expect-error -- negative: 0 ms
  fx.clock.sleep("cooldown", "-5m"),
  // @ts-expect-error -- an exponent is not an integer in the grammar: 0 ms
  fx.clock.sleep("cooldown", "1e3s"),
  // @ts-expect-error -- no weeks
  fx.clock.sleep("cooldown", "1w"),
  fx.clock.sleep("cooldown", "5s"),
  fx.clock.sleep("cooldown", "200ms"),
  fx.clock.sleep("cooldown", "1440m"),
  fx.clock.sleep("cooldown", "0ms"),
];

describe("unknown options are refused by name", () => {
  it("createApp({ now }) throws, naming the key and what to use instead", () => {
    expect(() => createApp({ modules: [], now: () => 0 } as never)).toThrow(
      'createApp(): unknown option "now" (time comes from a clock: { clock: createTimeTravel(start) })',
    );
    expect(() => createApp({ modules: [], stroe: 1 } as never)).toThrow(
      /unknown option "stroe" \(expected modules, config/,
    );
  });

  it("defineConfig and createApp refuse an unknown setting, section or env (OKE1095)", () => {
    const e = thrown(() => defineConfig({ http: { hots: "::" } } as never));
    expect(e.code).toBe("OKE1095");
    expect(e.message).toBe('oke config: unknown setting "http.hots"');
    expect(e.fix).toContain("http.port, http.host, http.bodyLimit");
    expect(thrown(() => defineConfig({ signal: {} } as never)).message).toBe(
      'oke config: unknown setting "signal"',
    );
    expect(
      thrown(() => createApp({ modules: [], config: { env: { prod: { signals: { lease: 1 } } } } as never }))
        .message,
    ).toBe('oke config: unknown setting "env.prod.signals.lease"');
    expect(thrown(() => defineConfig({ env: { production: {} } } as never)).message).toBe(
      'oke config: unknown setting "env.production"',
    );
    expect(() =>
      defineConfig({ http: { port: 1 }, env: { test: { drivers: { journal: "memory" } } } }),
    ).not.toThrow();
  });

  it("flow, signal.* and http.* already refuse unknown options", () => {
    expect(() => flow({ do: () => 1, durabel: true } as never)).toThrow('flow(): unknown option "durabel"');
    expect(() => signal.once("a", { retry: 1 } as never)).toThrow('signal.once("a"): unknown option "retry"');
    expect(() => http.get({ pth: "/x" } as never)).toThrow('http.get(): unknown option "pth"');
  });
});

describe("effects that name signals", () => {
  it("boot fails (OKE1082) when effects.emits names a signal the app does not declare", () => {
    const placed = signal.once("orders.placed");
    const worker = on(placed, flow("orders.fulfill", { do: () => undefined }));
    const create = flow("orders.create", { effects: { emits: ["orders.plcaed"] }, do: () => undefined });
    const e = thrown(() => createApp({ env: "test", modules: [{ worker, create }] }));
    expect(e.code).toBe("OKE1082");
    expect(e.message).toBe(
      'Flow "orders.create" declares effects.emits "orders.plcaed", but the app declares no signal "orders.plcaed".',
    );
    expect(e.fix).toContain("the app declares orders.placed");
  });

  it("boot fails (OKE1082) for effects.reads signal:<name>; other read resources are not signals", () => {
    const f = flow("ops.dlq", {
      effects: { reads: ["signal:tasks.email", "table:users"] },
      do: () => undefined,
    });
    const e = thrown(() => createApp({ env: "test", modules: [{ f }] }));
    expect(e.code).toBe("OKE1082");
    expect(e.message).toContain('effects.reads "tasks.email"');
    const g = flow("ops.other", { effects: { reads: ["table:users"] }, do: () => undefined });
    expect(() => createApp({ env: "test", modules: [{ g }] })).not.toThrow();
  });

  it("warns for a declared non-optional signal nobody consumes, not for optional or bound ones", () => {
    const lonely = signal.once("tasks.lonely");
    const quiet = signal.broadcast("events.quiet", { optional: true });
    const bound = signal.once("tasks.bound");
    const worker = on(bound, flow("tasks.work", { do: () => undefined }));
    const { warnings } = devApp([{ lonely, quiet, bound, worker }]);
    expect(warnings()).toEqual([
      'signal "tasks.lonely" has no flow bound to it, so every emit of it fails (OKE1240): bind one with on(signal, flow(…)), or declare it optional: true',
    ]);
  });

  it("an unbound broadcast warns that its emits need a subscriber elsewhere in the fleet, not that all fail", () => {
    const ping = signal.broadcast("events.ping");
    const { warnings } = devApp([{ ping }]);
    expect(warnings()).toEqual([
      'signal "events.ping" has no flow bound to it in this app, so its emits fail (OKE1240) unless another instance of the fleet runs one: bind one with on(signal, flow(…)), or declare it optional: true',
    ]);
  });
});

describe("fx.clock.sleep guards (dev)", () => {
  it("an unknown duration waits 0 ms and warns naming the flow and the string, once", async () => {
    let after = 0;
    const cool = flow("jobs.cool", {
      durable: true,
      do: async (_: unknown, fx) => {
        await fx.clock.sleep("cooldown", "5 seconds" as never);
        after++;
      },
    });
    const { app, warnings } = devApp([{ cool }]);
    await app.boot();
    await app.invoke(cool, undefined);
    await app.invoke(cool, undefined);
    await app.idle();
    expect(after).toBe(2); // 0 ms, as the spec says: the run went straight on
    expect(warnings()).toEqual([
      'flow "jobs.cool": fx.clock.sleep("cooldown", "5 seconds") is not a duration (<integer><ms|s|m|h|d>, e.g. "5s"), so it waits 0 ms',
    ]);
    await app.stop();
  });

  it("a missing duration warns that the first argument is the label", async () => {
    const f = flow("jobs.label", {
      durable: true,
      do: async (_: unknown, fx) => {
        await (fx.clock.sleep as (label: string) => Promise<void>)("8h");
      },
    });
    const { app, warnings } = devApp([{ f }]);
    await app.boot();
    await app.invoke(f, undefined);
    expect(warnings()).toEqual([
      'flow "jobs.label": fx.clock.sleep("8h") has no duration, so it waits 0 ms (the first argument is the label: fx.clock.sleep("8h", "8h"))',
    ]);
    await app.stop();
  });

  it("a sleep in a flow that is not durable warns once per flow", async () => {
    let steps = 0;
    const f = on(
      http.post("/nap"),
      flow("jobs.nap", {
        do: async (_: unknown, fx) => {
          await fx.clock.sleep("nap", "1h");
          steps++;
        },
      }),
    );
    const { app, warnings } = devApp([{ f }]);
    await app.boot();
    await app.request("/nap", { method: "POST" });
    await app.request("/nap", { method: "POST" });
    expect(steps).toBe(2);
    expect(warnings()).toEqual([
      'flow "jobs.nap" is not durable: fx.clock.sleep("nap") returns at once and the rest runs now (add durable: true to park the run)',
    ]);
    await app.stop();
  });
});
