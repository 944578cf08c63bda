// An emit of a signal a flow's hand-written effects.emits leaves out is warned once per flow and signal; the emit goes through.
import { describe, expect, it } from "vitest";
import { recordingLogger } from "../../test/conformance/app-fixture.ts";
import { createApp, flow, signal, signalReadRef } from "../index.ts";

const listed = signal.once("emits.listed", { optional: true });
const unlisted = signal.once("emits.unlisted", { optional: true });

describe("fx.emit against hand-written effects.emits", () => {
  it("warns once per flow and signal for a signal left out, and never for one listed, recorded or not written", async () => {
    const stale = flow("emits.stale", {
      effects: { emits: ["emits.listed"] },
      do: async (_: unknown, fx) => {
        await fx.emit(listed, {});
        await fx.emit(unlisted, {});
      },
    });
    // Only reads written by hand (the documented fx.deadLetters case): its emits are not checked.
    const readsOnly = flow("emits.reads-only", {
      effects: { reads: [signalReadRef(listed)] },
      do: async (_: unknown, fx) => fx.emit(unlisted, {}),
    });
    const none = flow("emits.none", { do: async (_: unknown, fx) => fx.emit(unlisted, {}) });
    const { logger, records } = recordingLogger();
    const app = createApp({ modules: [{ listed, unlisted, stale, readsOnly, none }], env: "test", logger });
    try {
      for (let i = 0; i < 3; i++) {
        await app.invoke(stale, {});
        await app.invoke(readsOnly, {});
        await app.invoke(none, {});
      }
      const warned = records.filter((r) => r.level === 40 && String(r.msg).includes("effects.emits"));
      expect(warned).toEqual([
        expect.objectContaining({
          flow: "emits.stale",
          signal: "emits.unlisted",
          declared: ["emits.listed"],
          msg: 'flow "emits.stale" emitted "emits.unlisted", which its hand-written effects.emits ("emits.listed") leaves out: the Manifest and the Console do not show it. Add it to effects.emits, or drop the effects option to have oke record them from the source',
        }),
      ]);
      // The emits went through all the same.
      const st = await app.store.stats("emits.unlisted", Date.now());
      expect(st.pending + st.delivered).toBe(9);
    } finally {
      await app.stop();
    }
  });
});
