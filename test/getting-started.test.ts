// docs/getting-started.md shows the starter's files: each copy of a file (a block is a whole program,
// so some files are shown twice) has the starter's code, comments aside.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

const REPO = join(import.meta.dirname, "..");
const STARTER = join(REPO, "templates/starter");
const FILE_LINE = /^\/\/ ((?:[\w.@[\]()-]+\/)*[\w.@[\]()-]+\.ts)$/;

/** Each file of the guide's ```ts program blocks, in order, with the line it starts at. */
function guideFiles(): Array<{ path: string; line: number; text: string }> {
  const lines = readFileSync(join(REPO, "docs/getting-started.md"), "utf8").split("\n");
  const files: Array<{ path: string; line: number; text: string }> = [];
  let inBlock = false;
  for (const [i, l] of lines.entries()) {
    if (/^```ts program/.test(l)) inBlock = true;
    else if (l === "```") inBlock = false;
    else if (inBlock) {
      const file = FILE_LINE.exec(l);
      if (file) files.push({ path: file[1]!, line: i + 1, text: "" });
      else if (files.length > 0) files.at(-1)!.text += `${l}\n`;
    }
  }
  return files;
}

/** The code alone: no comment lines, no doc comments, no blank lines. */
const code = (text: string): string =>
  text
    .replace(/\/\*\*[\s\S]*?\*\//g, "")
    .split("\n")
    .filter((l) => l.trim() !== "" && !l.trim().startsWith("//"))
    .join("\n");

describe("the getting-started guide and the starter", () => {
  const shown = guideFiles().filter((f) => existsSync(join(STARTER, f.path)));

  it("shows the starter's files", () => {
    expect(new Set(shown.map((f) => f.path))).toEqual(
      new Set([
        "src/flows/main/hello.ts",
        "src/signals/welcome.ts",
        "src/channels/email.ts",
        "src/flows/signup/create.ts",
        "src/flows/workers/welcome.ts",
        "src/flows/trials/start.ts",
      ]),
    );
  });

  it("every copy has the starter's code (src/channels/email.ts keeps its url in each: prod warns OKE1270 without)", () => {
    for (const f of shown)
      expect(code(f.text), `docs/getting-started.md:${f.line} (${f.path})`).toBe(
        code(readFileSync(join(STARTER, f.path), "utf8")),
      );
  });

  it("the starter's flows write no effects: oke records what they emit from the source (a hand-written list goes stale)", () => {
    for (const f of shown)
      expect(readFileSync(join(STARTER, f.path), "utf8"), f.path).not.toMatch(/\beffects:/);
  });
});
