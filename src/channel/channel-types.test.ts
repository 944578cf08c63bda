// A channel's payload types: fx.send takes the schema's input (as fx.emit does), the driver gets its output.
import { describe, expect, expectTypeOf, it } from "vitest";
import { z } from "zod";
import { flow } from "../flow/flow.ts";
import type { Fx } from "../fx/types.ts";
import { createTestApp } from "../testing.ts";
import { channel, type Channel } from "./channel.ts";

// Checked by `tsc --noEmit`: before, a channel was typed by its schema's output alone, so fx.send
// refused the input its schema accepts and took the output (a Date) that the schema refuses (OKE1265).
const stamp = channel("types.stamp", {
  schema: z.object({ at: z.string().transform((s) => new Date(s)), n: z.number().default(1) }),
});
const typed = channel<{ a: number }>("types.typed");
const bare = channel("types.bare");

describe("channel payload types", () => {
  it("a channel carries its schema's output and input", () => {
    expectTypeOf(stamp).toEqualTypeOf<
      Channel<{ at: Date; n: number }, { at: string; n?: number | undefined }>
    >();
    expectTypeOf(typed).toEqualTypeOf<Channel<{ a: number }, { a: number }>>();
    // `In` only widens: a Channel<P> parameter (app.sent.of) takes every channel of P.
    expectTypeOf(stamp).toMatchTypeOf<Channel<{ at: Date; n: number }>>();
  });

  it("fx.send takes the schema's input: a default may be left out, a transform's input is given", () => {
    const sends = async (fx: Fx): Promise<void> => {
      await fx.send(stamp, { at: "2024-01-01T00:00:00.000Z" });
      await fx.send(stamp, { at: "2024-01-01T00:00:00.000Z", n: 2 });
      // @ts-expect-error -- the schema's input is a string, not the Date its transform makes
      await fx.send(stamp, { at: new Date(), n: 1 });
      await fx.send(typed, { a: 1 });
      // @ts-expect-error -- a channel typed by hand takes its own payload type
      await fx.send(typed, { a: "1" });
      await fx.send(bare, { anything: true });
    };
    expect(typeof sends).toBe("function");
  });

  it("at run time: the input is sent, the driver gets the output", async () => {
    const send = flow("types.send", {
      do: async (_: unknown, fx) => fx.send(stamp, { at: "2024-01-01T00:00:00.000Z" }),
    });
    const app = await createTestApp({ modules: [{ stamp, send }] });
    try {
      await app.invoke(send, undefined);
      const [sent] = app.sent.of(stamp);
      expect(sent?.payload).toEqual({ at: new Date("2024-01-01T00:00:00.000Z"), n: 1 });
    } finally {
      await app.stop();
    }
  });
});
