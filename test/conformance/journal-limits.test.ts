// Journaled values on every driver: a step value, call result, run output or sleep label no driver could hold is refused before anything is written, naming the step.
import { describe, expect, it } from "vitest";
import { flow, http, on, OkeError } from "../../src/index.ts";
import { MAX_DEPTH, MAX_PAYLOAD_BYTES } from "../../src/signal/storable.ts";
import { appFactory } from "./app-fixture.ts";
import { drivers } from "./drivers.ts";

const nested = (levels: number): unknown => {
  let v: unknown = "leaf";
  for (let i = 0; i < levels; i++) v = i % 2 === 0 ? { a: v } : [v];
  return v;
};

/** A durable route whose one step returns what the request's `case` names. */
const values: Record<string, () => unknown> = {
  nul: () => ({ note: "a\u0000b" }),
  high: () => ({ list: ["ok", "lone \uD800"] }),
  low: () => "\uDC00",
  key: () => ({ ["k\u0000"]: 1 }),
  deep: () => nested(5_000),
  justDeep: () => nested(MAX_DEPTH + 1),
  big: () => ({ s: "x".repeat(MAX_PAYLOAD_BYTES) }),
  fine: () => ({ deep: nested(MAX_DEPTH - 1), text: "😀 \u0001 é" }),
};

describe.each(drivers)("journaled values on the $name driver", (driver) => {
  const apps = appFactory(driver);
  const run = on(
    http.post("/steps/:case"),
    flow("steps.run", {
      durable: true,
      do: async ({ case: c }: { case: string }, fx) => {
        const v = await fx.step("produce", () => values[c]!());
        await fx.step("after", () => "after");
        // Returned as is: the output holds exactly the step's value (at the limits, in the "fine" case).
        return v;
      },
    }),
  );

  const refused = async (c: string) => {
    const app = await apps.make([{ run }]);
    const res = await app.request(`/steps/${c}`, { method: "POST" });
    const body = (await res.json()) as { error: { code: string; message: string } };
    const [r] = await app.operator.runs();
    const journal = (await app.operator.run(r!.id))!.journal;
    return { status: res.status, error: body.error, run: r!, journal };
  };

  it.each([
    ["nul", "OKE1255", "string at $.note contains a NUL character (\\u0000)"],
    ["high", "OKE1256", "string at $.list[1] contains a lone UTF-16 surrogate (not valid Unicode)"],
    ["low", "OKE1256", "string at $ contains a lone UTF-16 surrogate (not valid Unicode)"],
    ["key", "OKE1255", 'string at $["k\\u0000"] (the key) contains a NUL character (\\u0000)'],
    ["justDeep", "OKE1252", "nested deeper than 64 levels (or circular) at $"],
    ["deep", "OKE1252", "nested deeper than 64 levels (or circular) at $"],
    [
      "big",
      "OKE1253",
      `value is ${MAX_PAYLOAD_BYTES + 8} bytes as JSON, more than the ${MAX_PAYLOAD_BYTES} a durable run may store per value`,
    ],
  ])(
    "a step returning %s fails the step with %s naming it; no value is journaled",
    async (c, code, detail) => {
      const { status, error, run: r, journal } = await refused(c);
      expect(status).toBe(500);
      expect(error.code).toBe(code);
      expect(error.message.startsWith(`step "produce" of run "${r.id}": ${detail}`), error.message).toBe(
        true,
      );
      expect(r.status).toBe("failed");
      // The step is journaled as failed (replay fails it the same way); no value, and "after" never ran.
      expect(journal.map((e) => [e.kind, "name" in e ? e.name : e.label, "value" in e])).toEqual([
        ["step", "produce", false],
      ]);
      expect(journal[0]).toMatchObject({ error: { code } });
    },
  );

  it("a value right at the limits is journaled and replayed unchanged", async () => {
    const app = await apps.make([{ run }]);
    const res = await app.request("/steps/fine", { method: "POST" });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { data: unknown }).data).toEqual(values.fine!());
  });

  it("checks call results, run outputs and sleep labels too", async () => {
    const child = flow("steps.child", { do: () => ({ s: "nul\u0000" }) });
    const caller = on(
      http.post("/call"),
      flow("steps.caller", { durable: true, do: async (_: unknown, fx) => fx.call(child, {}) }),
    );
    const output = on(
      http.post("/output"),
      flow("steps.output", { durable: true, do: () => ({ s: "\uD800" }) }),
    );
    const sleeper = on(
      http.post("/sleep"),
      flow("steps.sleeper", {
        durable: true,
        do: async (_: unknown, fx) => fx.clock.sleep("wait\u0000", "1h"),
      }),
    );
    const app = await apps.make([{ caller, output, sleeper }]);
    const error = async (path: string) =>
      (
        (await (await app.request(path, { method: "POST" })).json()) as {
          error: { code: string; message: string };
        }
      ).error;
    const call = await error("/call");
    expect(call.code).toBe("OKE1255");
    expect(call.message).toMatch(/^call "steps\.child" of run "[^"]+": string at \$\.s contains a NUL/);
    const out = await error("/output");
    expect(out.code).toBe("OKE1256");
    expect(out.message).toMatch(
      /^the output of run "[^"]+" \(steps\.output\): string at \$\.s contains a lone/,
    );
    const sleep = await error("/sleep");
    expect(sleep.code).toBe("OKE1255");
    expect(sleep.message).toMatch(/^sleep "wait\\u0000" of run "[^"]+": string at label contains a NUL/);
    const runs = await app.operator.runs();
    expect(runs.map((r) => [r.flow, r.status]).sort()).toEqual([
      ["steps.caller", "failed"],
      ["steps.output", "failed"],
      ["steps.sleeper", "failed"],
    ]);
  });

  it("a step that throws an error whose message holds a NUL fails with a storable message", async () => {
    const thrower = on(
      http.post("/throw"),
      flow("steps.thrower", {
        durable: true,
        do: async (_: unknown, fx) =>
          fx.step("boom", () => {
            throw new OkeError({ code: "E_BOOM", message: "bad \u0000 byte \uDC00" });
          }),
      }),
    );
    const app = await apps.make([{ thrower }]);
    expect((await app.request("/throw", { method: "POST" })).status).toBe(500);
    const [r] = await app.operator.runs();
    expect(r!.status).toBe("failed");
    const journal = (await app.operator.run(r!.id))!.journal;
    expect(journal[0]).toMatchObject({ error: { code: "E_BOOM", message: "bad \uFFFD byte \uFFFD" } });
  });
});
