// openSqlite: a better-sqlite3 binary that cannot be loaded is OKE1340 with the commands that fix it, not a loader's stack.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { openSqlite } from "./native.ts";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe("openSqlite", () => {
  it("opens a database with the installed binary", () => {
    const db = openSqlite(":memory:");
    expect(db.prepare("SELECT 1 AS one").get()).toEqual({ one: 1 });
    db.close();
  });

  it("a binary that is not one for this Node (here: not a binary at all) is OKE1340 naming the fix", () => {
    const dir = mkdtempSync(join(tmpdir(), "oke-native-"));
    dirs.push(dir);
    const fake = join(dir, "better_sqlite3.node");
    writeFileSync(fake, "x".repeat(4096));
    let err: unknown;
    try {
      openSqlite(":memory:", { nativeBinding: fake });
    } catch (e) {
      err = e;
    }
    expect(err).toMatchObject({ code: "OKE1340" });
    const e = err as { message: string; fix: string; cause: Error };
    expect(e.message).toMatch(/needs better-sqlite3's compiled binary/);
    expect(e.fix).toContain("npm approve-scripts better-sqlite3 esbuild");
    expect(e.fix).toContain("npm rebuild better-sqlite3");
    expect(e.cause.message).toMatch(/invalid ELF header/);
  });
});
