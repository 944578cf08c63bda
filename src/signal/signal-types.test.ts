// A signal's payload types: an emit takes the schema's input, the handler gets its output as JSON.
import { describe, expect, expectTypeOf, it } from "vitest";
import { z } from "zod";
import { flow, type Flow } from "../flow/flow.ts";
import { on } from "../flow/on.ts";
import type { DeadLetter, Fx } from "../fx/types.ts";
import { createTestApp } from "../testing.ts";
import { signal, type JsonOf } from "./signal.ts";

const mail = signal.once("types.mail", {
  schema: z.object({ to: z.string(), n: z.number().default(1) }),
});
const stamp = signal.once("types.stamp", {
  schema: z.object({ at: z.string().transform((s) => new Date(s)) }),
});
const bare = signal.once("types.bare", { optional: true });
const typed = signal.once<{ a: number }>("types.typed", { optional: true });

describe("signal payload types", () => {
  it("an emit takes the schema's input: a default may be left out, a transform's input is given", () => {
    const emits = async (fx: Fx): Promise<void> => {
      await fx.emit(mail, { to: "a@x" });
      await fx.emit(mail, { to: "a@x", n: 2 });
      await fx.emit(stamp, { at: "2024-01-01T00:00:00.000Z" });
      // @ts-expect-error -- the schema's input is a string, not the Date its transform makes
      await fx.emit(stamp, { at: new Date() });
      await fx.emit(bare);
      // @ts-expect-error -- a signal with a payload type needs one
      await fx.emit(typed);
    };
    expect(typeof emits).toBe("function");
  });

  it("the handler gets the schema's output as JSON: a Date arrives as its string", () => {
    const w1 = on(mail, flow("types.w1", { do: (input) => input.n }));
    const w2 = on(stamp, flow("types.w2", { do: (input) => input.at }));
    expectTypeOf(w1.flow).toEqualTypeOf<Flow<{ to: string; n: number }, number>>();
    expectTypeOf(w2.flow).toEqualTypeOf<Flow<{ at: string }, string>>();
    expectTypeOf<JsonOf<{ d: Date; f: () => void; n?: number; xs: Date[] }>>().toEqualTypeOf<{
      d: string;
      n?: number;
      xs: string[];
    }>();
    const dead = (fx: Fx) => fx.deadLetters(stamp);
    expectTypeOf(dead).returns.resolves.toEqualTypeOf<DeadLetter<{ at: string }>[]>();
  });

  it("at run time: app.emit takes the input, the handler receives the output's JSON", async () => {
    const got: unknown[] = [];
    const w1 = on(mail, flow("types.rw1", { do: (input) => void got.push(input) }));
    const w2 = on(stamp, flow("types.rw2", { do: (input) => void got.push(input) }));
    const app = await createTestApp({ modules: [{ w1, w2 }] });
    try {
      await app.emit(mail, { to: "a@x" });
      await app.emit(stamp, { at: "2024-01-01T00:00:00.000Z" });
      // @ts-expect-error -- app.emit needs the payload when the signal has a schema
      await expect(app.emit(mail)).rejects.toMatchObject({ code: "OKE1250" });
      await app.idle();
      expect(got).toEqual([{ to: "a@x", n: 1 }, { at: "2024-01-01T00:00:00.000Z" }]);
    } finally {
      await app.stop();
    }
  });
});
