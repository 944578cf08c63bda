// Every docs code block marked as a program (```ts program) is type-checked against this package's
// sources, and the ones marked ```ts program run are run too — so the docs cannot drift from the API.
// The marking and the file split are described in docs/testing.md ("Docs examples are programs").
import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runToEnd, userEnv } from "./package/proc.ts";

const REPO = join(import.meta.dirname, "..");
const FENCE = /^```ts program( run)?\s*$/;
/** A line that starts a new file inside a block: `// src/flows/hello.ts`, `// oke.config.ts`. */
const FILE_LINE = /^\/\/ ((?:[\w.@[\]()-]+\/)*[\w.@[\]()-]+\.ts)$/;

interface Block {
  doc: string;
  /** 1-based line of the opening fence. */
  line: number;
  run: boolean;
  files: Array<{ path: string; text: string; firstLine: number }>;
}

function extract(doc: string): Block[] {
  const lines = readFileSync(join(REPO, doc), "utf8").split("\n");
  const blocks: Block[] = [];
  for (let i = 0; i < lines.length; i++) {
    const m = FENCE.exec(lines[i]!);
    if (!m) continue;
    const block: Block = { doc, line: i + 1, run: m[1] !== undefined, files: [] };
    let current = { path: "main.ts", text: "", firstLine: i + 2 };
    for (i++; i < lines.length && lines[i] !== "```"; i++) {
      const file = FILE_LINE.exec(lines[i]!);
      if (file) {
        if (current.text.trim() !== "") block.files.push(current);
        current = { path: file[1]!, text: "", firstLine: i + 1 };
      }
      current.text += `${lines[i]!}\n`;
    }
    if (current.text.trim() !== "") block.files.push(current);
    blocks.push(block);
  }
  return blocks;
}

const docs = ["README.md", ...readdirSync(join(REPO, "docs")).map((f) => `docs/${f}`)].filter((f) =>
  f.endsWith(".md"),
);
const blocks = docs.flatMap(extract);
const work = mkdtempSync(join(tmpdir(), "oke-docs-"));
let where: ReturnType<typeof writeBlocks>;
beforeAll(() => {
  where = writeBlocks();
  symlinkSync(join(REPO, "node_modules"), join(work, "node_modules"));
  writeFileSync(join(work, "package.json"), JSON.stringify({ name: "docs-examples", type: "module" }));
  const src = (f: string): string[] => [join(REPO, "src", f)];
  writeFileSync(
    join(work, "tsconfig.json"),
    JSON.stringify({
      extends: join(REPO, "tsconfig.json"),
      compilerOptions: {
        noEmit: true,
        rootDir: "/",
        paths: {
          okengine: src("index.ts"),
          "okengine/testing": src("testing.ts"),
          "okengine/vitest": src("vitest.ts"),
          "okengine/store": src("store-api.ts"),
          "okengine/store/conformance": src("store-conformance.ts"),
        },
      },
      include: ["b*/**/*.ts"],
      exclude: [],
    }),
  );
});
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** Writes each block as its own little project under `work`; `@/x` becomes a relative import of its src/x. */
function writeBlocks(): Map<string, { block: Block; file: Block["files"][number] }> {
  const where = new Map<string, { block: Block; file: Block["files"][number] }>();
  blocks.forEach((block, n) => {
    const dir = join(work, `b${n}`);
    for (const file of block.files) {
      const full = join(dir, file.path);
      mkdirSync(dirname(full), { recursive: true });
      const rel = relative(dirname(full), join(dir, "src")) || ".";
      const text = file.text.replace(
        /from "@\/([^"]+)"/g,
        (_, p: string) => `from "${rel.startsWith(".") ? rel : `./${rel}`}/${p}.ts"`,
      );
      // A block with no import or export is still a module (top-level await).
      writeFileSync(full, /^(import|export) /m.test(text) ? text : `${text}export {};\n`);
      where.set(relative(work, full), { block, file });
    }
  });
  return where;
}

describe("docs examples", () => {
  it("finds the program blocks (README, getting started, testing, …)", () => {
    expect(blocks.length).toBeGreaterThanOrEqual(4);
    for (const b of blocks) expect(b.files.length, `${b.doc}:${b.line}`).toBeGreaterThan(0);
    for (const doc of ["docs/getting-started.md", "docs/signals.md", "docs/durable.md"])
      expect(blocks.filter((b) => b.doc === doc).length, doc).toBeGreaterThan(0);
  });

  it("has no unchecked TypeScript or JavaScript block: every one is a ```ts program", () => {
    const unchecked = docs.flatMap((doc) =>
      readFileSync(join(REPO, doc), "utf8")
        .split("\n")
        .flatMap((l, i) =>
          /^```\s*(ts|typescript|js|javascript|tsx|jsx|mjs)\b/.test(l) && !FENCE.test(l)
            ? [`${doc}:${i + 1}`]
            : [],
        ),
    );
    expect(unchecked).toEqual([]);
  });

  it("type-check against this package", async () => {
    const tsc = join(REPO, "node_modules/typescript/bin/tsc");
    const r = await runToEnd(
      process.execPath,
      [tsc, "-p", join(work, "tsconfig.json"), "--pretty", "false"],
      {
        cwd: work,
        env: userEnv(),
      },
    );
    // Point each error at the markdown line it comes from.
    const errors = r.output
      .split("\n")
      .filter((l) => l.includes("error TS"))
      .map((l) => {
        const m = /^(.+?)\((\d+),(\d+)\): (.*)$/.exec(l);
        const hit = m ? where.get(m[1]!) : undefined;
        return hit && m ? `${hit.block.doc}:${hit.file.firstLine + Number(m[2]) - 1}: ${m[4]!}` : l;
      });
    expect(errors).toEqual([]);
    expect(r.code, r.output).toBe(0);
  }, 120_000);

  it.each(blocks.filter((b) => b.run).map((b) => [`${b.doc}:${b.line}`, b] as const))(
    "%s runs",
    async (_, block) => {
      const n = blocks.indexOf(block);
      const dir = join(work, `b${n}`);
      const main = block.files[0]!.path;
      const r = await runToEnd(process.execPath, ["--import", "tsx", main], {
        cwd: dir,
        env: userEnv({ TSX_TSCONFIG_PATH: join(work, "tsconfig.json") }),
      });
      expect(r.code, r.output).toBe(0);
    },
    60_000,
  );
});
