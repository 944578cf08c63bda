// fx.emit with something that is not a signal handle: the error shows what was passed.
import { describe, expect, it } from "vitest";
import { flow } from "../flow/flow.ts";
import { http } from "../flow/http-trigger.ts";
import { on } from "../flow/on.ts";
import { createTestApp } from "../testing.ts";
import type { SignalHandle } from "./signal.ts";

const emitting = (target: unknown) =>
  on(
    http.post("/signup"),
    flow("signup.create", {
      do: async (_input, fx) => {
        await fx.emit(target as SignalHandle, { to: "a@example.com" });
        return { ok: true };
      },
    }),
  );

async function emitError(target: unknown): Promise<string> {
  const app = await createTestApp({ modules: [{ route: emitting(target) }] });
  try {
    const err = await app.invoke("signup.create", {}).then(
      () => undefined,
      (e: unknown) => e,
    );
    return (err as Error).message;
  } finally {
    await app.stop();
  }
}

describe("fx.emit(not a handle)", () => {
  it("a signal's name as a string is shown quoted, with what to pass instead", async () => {
    expect(await emitError("welcome.sned")).toBe(
      'fx.emit(signal, payload): the first argument must be a signal handle (flow "signup.create"), got the string "welcome.sned"; emit the handle the signal is declared as (import it from src/signals/), not its name',
    );
  });

  it("a long string is cut; other values are named by kind", async () => {
    const long = await emitError("x".repeat(500));
    expect(long).toContain(`got the string "${"x".repeat(80)}…"`);
    expect(long.length).toBeLessThan(400);
    expect(await emitError(undefined)).toMatch(/, got undefined$/);
    expect(await emitError({ name: "welcome", extra: 1 })).toMatch(
      /, got an object with keys \["name","extra"\]$/,
    );
  });
});
