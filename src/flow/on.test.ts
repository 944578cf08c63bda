// on(): the binding's input type comes from the trigger for an inline flow and from a declared flow's own `in`.
import { describe, expect, expectTypeOf, it } from "vitest";
import { z } from "zod";
import { every } from "../clock/schedule.ts";
import type { ClockInput } from "../clock/schedule.ts";
import { signal } from "../signal/signal.ts";
import { createTestApp } from "../testing.ts";
import { flow, type Flow } from "./flow.ts";
import { http } from "./http-trigger.ts";
import { on } from "./on.ts";

// Checked by `tsc --noEmit` (the project's `include` holds src/**): these lines fail to compile
// when the inference regresses.
const search = on(
  http.post({ path: "/search", in: z.object({ q: z.string() }) }),
  flow("search", { do: (input) => input.q.toUpperCase() }),
);
const create = flow("orders.create", {
  in: z.object({ qty: z.number() }),
  do: (input) => ({ qty: input.qty }),
});
const createRoute = on(http.post("/orders"), create);
const bare = on(http.get("/ping"), flow("ping", { do: (input) => input }));
const task = signal.once("tasks.t", { schema: z.object({ to: z.string() }) });
const worker = on(task, flow("tasks.worker", { do: (input) => input.to.length }));
const tick = on(every("1m"), flow("tick", { do: (input) => input.scheduledAt }));

describe("on() types", () => {
  it("an http trigger's `in` types an inline flow's input", () => {
    expectTypeOf(search.flow).toEqualTypeOf<Flow<{ q: string }, string>>();
  });

  it("a bare http trigger keeps a declared flow's input, so app.invoke checks it", async () => {
    expectTypeOf(createRoute.flow).toEqualTypeOf<Flow<{ qty: number }, { qty: number }>>();
    expectTypeOf(bare.flow).toEqualTypeOf<Flow<unknown, unknown>>();
    const app = await createTestApp({ modules: [{ createRoute }] });
    try {
      // @ts-expect-error -- qty is a number
      await expect(app.invoke(createRoute.flow, { qty: "x" })).rejects.toMatchObject({ code: "OKE1422" });
      expect(await app.invoke(createRoute.flow, { qty: 2 })).toEqual({ qty: 2 });
    } finally {
      await app.stop();
    }
  });

  it("signals and clocks still type an inline flow's input", () => {
    expectTypeOf(worker.flow).toEqualTypeOf<Flow<{ to: string }, number>>();
    expectTypeOf(tick.flow).toEqualTypeOf<Flow<ClockInput, number>>();
  });

  it("a flow whose input does not fit the trigger is refused", () => {
    // @ts-expect-error -- the trigger gives { q: string }, the flow wants { qty: number }
    expect(() => on(http.post({ path: "/x", in: z.object({ q: z.string() }) }), create)).not.toThrow();
  });
});

describe("on() with a trigger factory passed uncalled", () => {
  const f = flow("x", { do: () => 1 });
  const bind = (trigger: unknown) => () => on(trigger as never, f);
  it.each([
    ["http.get", http.get, "did you mean http.get()?"],
    ["http.delete", http.delete, "did you mean http.delete()?"],
    ["every", every, 'did you mean every("5m")?'],
  ])("%s names the call it needs", (_, trigger, hint) => {
    expect(bind(trigger)).toThrow(hint);
  });
  it("anything else keeps the plain message", () => {
    expect(bind(() => 1)).toThrow(
      /^on\(trigger, flow\): trigger must be a signal handle, an http\.\* trigger, or a clock \(every \/ clock\)$/,
    );
  });
});
