// oke dev's file watcher on a real directory tree: saves by rename, in place, touches, folders that come, go and come back.
import { mkdirSync, mkdtempSync, renameSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { DEV_WATCH } from "./dev.ts";
import { watchTree, type TreeWatcher, type TreeWatcherOptions } from "./watch-tree.ts";

let dir = "";
let watcher: TreeWatcher | undefined;
afterEach(() => {
  watcher?.close();
  watcher = undefined;
  if (dir !== "") rmSync(dir, { recursive: true, force: true });
});

/** Watches `dir` as oke dev does (src/ and a few top files; `options`: exactly its rules) and records what it reports. */
function watching(options?: TreeWatcherOptions): {
  seen: string[];
  next(path: string, what: string): Promise<void>;
} {
  dir = mkdtempSync(join(tmpdir(), "oke-watch-"));
  mkdirSync(join(dir, "src/flows/a"), { recursive: true });
  mkdirSync(join(dir, "other"));
  writeFileSync(join(dir, "src/flows/a/one.ts"), "1");
  const seen: string[] = [];
  const waiters: Array<() => void> = [];
  watcher = watchTree(
    dir,
    options ?? {
      descend: (rel) => rel === "" || rel === "src" || (rel.startsWith("src/") && !/\/\./.test(rel)),
      relevant: (rel) => (rel.startsWith("src/") ? !/\/\./.test(rel) : rel === "package.json"),
    },
    (path) => {
      seen.push(path);
      for (const w of waiters.splice(0)) w();
    },
  );
  /** Resolves once `path` is reported after now; rejects after a generous deadline. */
  const next = (path: string, what: string): Promise<void> => {
    const from = seen.length;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`${what}: ${path} not reported; saw ${JSON.stringify(seen.slice(from))}`)),
        20_000,
      );
      const check = (): void => {
        if (seen.slice(from).includes(path)) {
          clearTimeout(timer);
          resolve();
        } else waiters.push(check);
      };
      waiters.push(check);
    });
  };
  return { seen, next };
}

describe("watchTree", () => {
  it("keeps seeing a file after it was replaced by rename: in-place writes and touches too", async () => {
    const w = watching();
    const one = join(dir, "src/flows/a/one.ts");
    for (let i = 0; i < 3; i++) {
      let reported = w.next(one, `rename-replace ${i}`);
      writeFileSync(`${one}.tmp`, `renamed ${i}`);
      renameSync(`${one}.tmp`, one);
      await reported;
      reported = w.next(one, `in place ${i}`);
      writeFileSync(one, `in place ${i}`);
      await reported;
      reported = w.next(one, `touch ${i}`);
      const t = new Date(Date.now() + (i + 1) * 1000);
      utimesSync(one, t, t);
      await reported;
    }
  });

  it("watches a folder created later, forgets one removed, and watches it again when it comes back", async () => {
    const w = watching();
    const b = join(dir, "src/flows/b");
    await Promise.all([w.next(b, "mkdir"), Promise.resolve(mkdirSync(b))]);
    const two = join(b, "two.ts");
    await Promise.all([w.next(two, "a file in the new folder"), Promise.resolve(writeFileSync(two, "2"))]);

    // Moved away, then another folder at the same path: the old watch must not stand in for it.
    const moved = w.next(join(dir, "src/flows/b-old"), "the folder moved");
    renameSync(b, join(dir, "src/flows/b-old"));
    await moved;
    const back = w.next(b, "the folder back");
    mkdirSync(b);
    await back;
    await Promise.all([w.next(two, "a file in the new b"), Promise.resolve(writeFileSync(two, "2 again"))]);
    const old = join(dir, "src/flows/b-old/two.ts");
    await Promise.all([w.next(old, "a file in the moved folder"), Promise.resolve(writeFileSync(old, "x"))]);
  });

  it("reports selected top files, and nothing from dot-files or folders outside src/", async () => {
    const w = watching();
    writeFileSync(join(dir, "src/flows/.one.ts.swp"), "x");
    writeFileSync(join(dir, "other/x.ts"), "x");
    writeFileSync(join(dir, "README.md"), "x");
    await Promise.all([
      w.next(join(dir, "package.json"), "package.json"),
      Promise.resolve(writeFileSync(join(dir, "package.json"), "{}")),
    ]);
    // Linux: one inotify queue, read in order, so what the writes before it caused is reported by now.
    expect(w.seen).toEqual([join(dir, "package.json")]);
  });

  it("with oke dev's rules, reports none of the tests the loader skips, however saved; a flow beside them is reported", async () => {
    const w = watching(DEV_WATCH);
    const flows = join(dir, "src/flows");
    writeFileSync(join(flows, "a/one.test.ts"), "x");
    writeFileSync(join(flows, "a/one.spec.ts.tmp"), "x");
    renameSync(join(flows, "a/one.spec.ts.tmp"), join(flows, "a/one.spec.ts"));
    writeFileSync(join(flows, "a/one.bench.ts"), "x");
    mkdirSync(join(flows, "a/__tests__"));
    writeFileSync(join(flows, "a/__tests__/one.ts"), "x");
    mkdirSync(join(dir, "src/lib/__mocks__"), { recursive: true });
    writeFileSync(join(dir, "src/lib/__mocks__/words.ts"), "x");
    const one = join(flows, "a/one.ts");
    await Promise.all([w.next(one, "the flow"), Promise.resolve(writeFileSync(one, "2"))]);
    // One inotify queue, read in order: the tests written before the flow were read before it.
    // src/lib is reported: a folder that appeared holds files that count.
    expect(w.seen.filter((p) => p !== one)).toEqual([join(dir, "src/lib")]);
    // A test file renamed to a module name is a module now, and the other way round it was one.
    const renamed = join(flows, "a/two.ts");
    await Promise.all([
      w.next(renamed, "a test renamed to a module"),
      Promise.resolve(renameSync(join(flows, "a/one.test.ts"), renamed)),
    ]);
    const test = join(flows, "a/two.test.ts");
    await Promise.all([
      w.next(renamed, "a module renamed to a test"),
      Promise.resolve(renameSync(renamed, test)),
    ]);
    expect(w.seen).not.toContain(test);
  });
});
