// The log line of a failed queue attempt: which flow, which key, where it threw, and a dead letter at error level.
import { describe, expect, it } from "vitest";
import { recordingLogger } from "../../test/conformance/app-fixture.ts";
import { createApp, flow, on, signal } from "../index.ts";

describe("a failed signal.once attempt's log line", () => {
  it("names the flow and the key, carries the handler's stack, and is an error once the message is dead", async () => {
    const task = signal.once("tasks.charge", { retries: 1 });
    const charge = on(
      task,
      flow("workers.charge", {
        do: function chargeCard(): never {
          throw new Error("card declined");
        },
      }),
    );
    const { logger, records } = recordingLogger();
    const app = createApp({ modules: [{ task, charge }], env: "test", logger });
    await app.boot();
    try {
      await app.emit(task, { amount: 12 }, { key: "customer-7" });
      await app.idle();
      const lines = records.filter(
        (r) => r.msg === "attempt 1 failed: card declined" || r.msg === "attempt 2 failed: card declined",
      );
      expect(lines).toEqual([
        expect.objectContaining({
          level: 40,
          flow: "workers.charge",
          signal: "tasks.charge",
          key: "customer-7",
          attempt: 1,
          outcome: "pending",
        }),
        expect.objectContaining({
          level: 50,
          flow: "workers.charge",
          signal: "tasks.charge",
          key: "customer-7",
          attempt: 2,
          outcome: "dead",
        }),
      ]);
      for (const l of lines) {
        const err = l.err as { message: string; stack: string };
        expect(err.message).toBe("card declined");
        expect(err.stack).toMatch(/chargeCard/);
      }
    } finally {
      await app.stop();
    }
  });
});
