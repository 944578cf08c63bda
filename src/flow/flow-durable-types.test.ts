// flow()'s `durable: true` is kept in the type (Flow<I, O, true>), so a caller can type a durable callee's parked answer; inference elsewhere is unchanged.
import { describe, expect, expectTypeOf, it } from "vitest";
import { z } from "zod";
import type { App } from "../app/types.ts";
import type { Fx } from "../fx/types.ts";
import { flow, type AnyFlow, type Flow } from "./flow.ts";
import { http } from "./http-trigger.ts";
import { on } from "./on.ts";

// Checked by `tsc --noEmit` (the project's `include` holds src/**): these lines fail to compile
// when the inference regresses.
const durable = flow("types.durable", { durable: true, do: async () => 7 });
const plain = flow("types.plain", { do: async () => 7 });
const off = flow("types.off", { durable: false, do: async () => 7 });
const routed = on(
  http.post({ path: "/types", in: z.object({ q: z.string() }) }),
  flow("types.routed", { durable: true, do: async (input) => input.q.length }),
);

describe("durable in a flow's type", () => {
  it("durable: true is the literal true; no durable (or false) keeps the defaults", () => {
    expectTypeOf(durable).toEqualTypeOf<Flow<unknown, number, true>>();
    expectTypeOf(plain).toEqualTypeOf<Flow<unknown, number>>();
    expectTypeOf(off).toEqualTypeOf<Flow<unknown, number, false>>();
    expect([durable.durable, plain.durable, off.durable]).toEqual([true, false, false]);
  });

  it("a durable flow still binds, stores and infers its trigger's input as before", () => {
    expectTypeOf(routed.flow).toEqualTypeOf<Flow<{ q: string }, number>>();
    expectTypeOf(durable).toMatchTypeOf<AnyFlow>();
    expectTypeOf<Flow<unknown, number, true>>().toMatchTypeOf<Flow<unknown, number>>();
  });

  it("fx.call keeps O for a plain callee and answers O | undefined for a durable one (it may park)", () => {
    expectTypeOf<ReturnType<typeof _calls>>().toEqualTypeOf<{
      durable: Promise<number | undefined>;
      plain: Promise<number>;
      off: Promise<number>;
    }>();
  });

  it("app.invoke is typed as fx.call is; by name it is O | undefined", () => {
    expectTypeOf<ReturnType<typeof _invokes>>().toEqualTypeOf<{
      durable: Promise<number | undefined>;
      plain: Promise<number>;
      off: Promise<number>;
      named: Promise<string | undefined>;
    }>();
  });
});

// Typed only, never called.
const _calls = (fx: Fx) => ({
  durable: fx.call(durable, {}),
  plain: fx.call(plain, {}),
  off: fx.call(off, {}),
});

const _invokes = (app: App) => ({
  durable: app.invoke(durable, {}),
  plain: app.invoke(plain, {}),
  off: app.invoke(off, {}),
  named: app.invoke<unknown, string>("types.plain", {}),
});
