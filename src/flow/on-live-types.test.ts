// on() refuses a live signal in its type: a live signal has no worker flows, so the binding could only fail at boot (OKE1078).
import { describe, expect, expectTypeOf, it } from "vitest";
import { z } from "zod";
import { signal } from "../signal/signal.ts";
import { flow } from "./flow.ts";
import { on, type TriggerOf } from "./on.ts";

const feed = signal.live("types.feed", { schema: z.object({ state: z.string() }) });
const task = signal.once("types.task", { schema: z.object({ state: z.string() }) });
const news = signal.broadcast("types.news", { schema: z.object({ state: z.string() }) });

describe("on() and live signals", () => {
  it("takes once and broadcast signals, not live ones", () => {
    // Before, TriggerOf held every SignalHandle, so `on(feed, …)` compiled and failed at boot.
    expectTypeOf(feed).not.toMatchTypeOf<TriggerOf<{ state: string }>>();
    expectTypeOf(task).toMatchTypeOf<TriggerOf<{ state: string }>>();
    expectTypeOf(news).toMatchTypeOf<TriggerOf<{ state: string }>>();
    const w = flow("types.feed.w", { do: (input: { state: string }) => input.state });
    // @ts-expect-error -- a live signal has no worker flows
    expect(() => on(feed, w)).not.toThrow(); // on() itself accepts it at run time; boot refuses it (OKE1078)
    expect(on(task, w).trigger).toBe(task);
  });
});
