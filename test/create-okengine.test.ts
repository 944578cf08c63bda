// create-okengine's own command line: its help names `npm create okengine`, not the `oke init` it runs.
import { spawnSync } from "node:child_process";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

const BIN = join(import.meta.dirname, "../packages/create-okengine/index.js");

describe("create-okengine --help", () => {
  it.each(["--help", "-h"])("%s prints its own usage and exits 0", (flag) => {
    const r = spawnSync(process.execPath, [BIN, flag], { encoding: "utf8" });
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/^Usage: npm create okengine@latest \[dir\]\n/);
    expect(r.stdout).toContain("npx okengine init [dir]");
    expect(r.stdout).not.toContain("Usage: oke init");
    expect(r.stderr).toBe("");
  });

  it.each([
    [["--force"], "unknown option '--force'"],
    [["app", "-y"], "unknown option '-y'"],
    [["a", "b"], "one directory at most, got 2: a b"],
  ])("%j is refused in its own words, with its usage and exit 1", (args, why) => {
    const r = spawnSync(process.execPath, [BIN, ...args], { encoding: "utf8", cwd: tmpdir() });
    expect(r.status).toBe(1);
    expect(r.stdout).toBe("");
    expect(r.stderr.split("\n").slice(0, 3)).toEqual([
      `create-okengine: ${why}`,
      "",
      "Usage: npm create okengine@latest [dir]",
    ]);
    expect(r.stderr).not.toContain("Usage: oke init");
  });
});
