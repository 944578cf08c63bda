// The signal option defaults as documented (docs/signals.md's Options table, the option types' JSDoc, README) agree with the code and the spec (retries 3, deadLetter true, optional false, description the name).
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { signal } from "../src/index.ts";
import { DEFAULT_LIVE_RETENTION } from "../src/signal/live-runtime.ts";

const REPO = join(import.meta.dirname, "..");
const read = (f: string): string => readFileSync(join(REPO, f), "utf8");

/** Option → its Default cell in the Options table of docs/signals.md. */
function documentedDefaults(): Record<string, string> {
  const text = read("docs/signals.md");
  const section = text.slice(text.indexOf("## Options"), text.indexOf("## The life of a message"));
  const rows = section.split("\n").filter((l) => /^\| `\w+`/.test(l));
  return Object.fromEntries(
    rows.map((r) => {
      const cells = r.split("|").map((c) => c.trim());
      return [cells[1]!.replaceAll("`", ""), cells[4]!];
    }),
  );
}

describe("signal option defaults", () => {
  it("the handles carry the spec's defaults", () => {
    const once = signal.once("d.once");
    expect([once.retries, once.deadLetter, once.optional, once.schema, once.description]).toEqual([
      3,
      true,
      false,
      undefined,
      "d.once",
    ]);
    const b = signal.broadcast("d.b");
    expect([b.optional, b.schema, b.description]).toEqual([false, undefined, "d.b"]);
    const live = signal.live("d.live");
    expect([live.optional, live.retention, live.description]).toEqual([false, undefined, "d.live"]);
    expect(DEFAULT_LIVE_RETENTION).toBe("24h");
  });

  it("docs/signals.md states every option of every helper with the code's default", () => {
    expect(documentedDefaults()).toEqual({
      schema: "none: nothing checked",
      optional: "`false`",
      description: "the signal's name",
      retries: "`3`",
      deadLetter: "`true`",
      retention: `\`"${DEFAULT_LIVE_RETENTION}"\``,
    });
  });

  it("the option types' JSDoc and the README say the same defaults", () => {
    const src = read("src/signal/signal.ts");
    const doc = (field: string): string => {
      const m = new RegExp(`/\\*\\*([^]*?)\\*/\\s*${field}\\?:`).exec(src);
      return m?.[1] ?? "";
    };
    expect(doc("schema")).toContain("Default: none");
    expect(doc("optional")).toContain("Default `false`");
    expect(doc("description")).toContain("Default: the signal name");
    expect(doc("retries")).toContain("Default `3`");
    expect(doc("deadLetter")).toContain("Default `true`");
    expect(doc("retention")).toContain(`Default \`"${DEFAULT_LIVE_RETENTION}"\``);
    const readme = read("README.md");
    for (const said of [
      "`retries: 3`",
      "`deadLetter: true`",
      "`optional: false`",
      "`schema` none",
      "`description` the signal's name",
      `\`retention: "${DEFAULT_LIVE_RETENTION}"\``,
    ])
      expect(readme).toContain(said);
  });
});
