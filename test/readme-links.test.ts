// The README is the package's front page on npm too: its relative links must point at files the package ships.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

const REPO = join(import.meta.dirname, "..");
const pkg = JSON.parse(readFileSync(join(REPO, "package.json"), "utf8")) as { files: string[] };
/** The top-level names package.json "files" ships (negations only remove test files and fixtures). */
const shipped = pkg.files.filter((f) => !f.startsWith("!")).map((f) => f.replace(/\/.*$/, ""));

describe("README links", () => {
  it("every relative link names a file that exists and is in the npm package", () => {
    const text = readFileSync(join(REPO, "README.md"), "utf8");
    const targets = [...text.matchAll(/\]\(([^)\s]+)\)/g)]
      .map((m) => m[1]!)
      .filter((t) => !/^[a-z]+:/i.test(t) && !t.startsWith("#"))
      .map((t) => t.replace(/#.*$/, ""));
    expect(targets.length).toBeGreaterThan(5);
    const broken = targets.filter((t) => !existsSync(join(REPO, t)) || !shipped.includes(t.split("/")[0]!));
    expect(broken).toEqual([]);
  });
});
