// fx.step's value comes back through JSON in plain and durable flows alike, on the first attempt too, as its type (Jsonify) says.
import { afterEach, describe, expect, it } from "vitest";
import type { OkeError } from "../errors.ts";
import { createApp, flow, type App, type Fx } from "../index.ts";

/** A value with what JSON cannot keep: a Date, a Map, a method, undefined in an object and an array. */
const rich = () => ({
  at: new Date(Date.UTC(2026, 11, 5)),
  seen: new Map([["a", 1]]),
  total() {
    return 1;
  },
  gone: undefined,
  list: [1, undefined, () => 2],
  n: 3,
});
const AS_JSON = { at: "2026-12-05T00:00:00.000Z", seen: {}, list: [1, null, null], n: 3 };

const body = async (_: unknown, fx: Fx) => {
  const v = await fx.step("load", rich);
  const when = await fx.step("when", () => new Date(Date.UTC(2026, 11, 5)));
  // The types agree with what runs: a Date comes back as its ISO string.
  const year: string = when.slice(0, 4);
  const nothing = await fx.step("nothing", () => undefined);
  let bigint: unknown;
  try {
    await fx.step("count", () => ({ rows: [1n] }));
  } catch (e) {
    bigint = { code: (e as OkeError).code, message: (e as Error).message };
  }
  return { v, year, nothing: nothing === undefined, bigint };
};
const plain = flow("step.plain", { do: body });
const durable = flow("step.durable", { durable: true, do: body });

const apps: App[] = [];
afterEach(async () => {
  while (apps.length > 0) await apps.pop()!.stop();
});

describe("fx.step's value is JSON, durable or not", () => {
  it.each([
    ["plain", plain, 'step "count" of flow "step.plain"'],
    ["durable", durable, 'step "count" of run "'],
  ] as const)(
    "%s: a Date is its ISO string, a Map {}, methods and undefined gone (null in an array); a BigInt is OKE1306",
    async (_, f, subject) => {
      const app = createApp({ modules: [{ f }], env: "test" });
      apps.push(app);
      await app.start({ port: 0, host: "127.0.0.1" });
      const out = await app.invoke(f, {});
      expect(out.v).toEqual(AS_JSON);
      expect(Object.keys(out.v)).toEqual(["at", "seen", "list", "n"]);
      expect(out.year).toBe("2026");
      expect(out.nothing).toBe(true);
      expect(out.bigint).toMatchObject({ code: "OKE1306" });
      expect((out.bigint as { message: string }).message).toContain(subject);
      expect((out.bigint as { message: string }).message).toContain("value at $.rows[0] is a BigInt");
    },
  );
});

// Type-level: `npm run typecheck` compiles this file, so each line below must stay a type error.
export async function typeErrors(fx: Fx): Promise<unknown[]> {
  const when = await fx.step("when", () => new Date());
  const seen = await fx.step("seen", () => new Map([["a", 1]]));
  const acct = await fx.step("acct", () => ({ id: "a1", total: () => 1 }));
  return [
    // @ts-expect-error -- a step's Date comes back as a string
    when.getFullYear(),
    // @ts-expect-error -- a Map comes back as {}
    seen.get("a"),
    // @ts-expect-error -- methods do not survive JSON
    acct.total(),
    acct.id.toUpperCase(),
    when.slice(0, 4),
  ];
}
