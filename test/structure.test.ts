// The source tree's layering: no upward imports and no import cycles (eslint checks both per file; this checks the whole tree).
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const ROOT = fileURLToPath(new URL("../", import.meta.url));
const SRC = join(ROOT, "src");

/** .ts files under `dir`, relative to the repository root with "/" separators. */
function sources(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string): void => {
    for (const name of readdirSync(d)) {
      const p = join(d, name);
      if (statSync(p).isDirectory()) {
        if (name !== "fixtures" && name !== "node_modules") walk(p);
      } else if (p.endsWith(".ts") && !p.endsWith(".d.ts")) out.push(relative(ROOT, p).split("\\").join("/"));
    }
  };
  walk(dir);
  return out.sort();
}

interface Import {
  to: string;
  typeOnly: boolean;
}

/** Relative imports and re-exports of one file, resolved to repository paths. */
function importsOf(file: string): Import[] {
  const text = readFileSync(join(ROOT, file), "utf8");
  const out: Import[] = [];
  for (const m of text.matchAll(/^(?:import|export)\s+(type\s+)?[^;]*?\bfrom\s+"(\.{1,2}\/[^"]+)"/gms)) {
    const to = relative(ROOT, resolve(ROOT, dirname(file), m[2]!))
      .split("\\")
      .join("/");
    out.push({ to, typeOnly: m[1] !== undefined });
  }
  return out;
}

const isTest = (f: string): boolean =>
  /\.test\.ts$|test-helper\.ts$|test-support\.ts$|\/conformance\//.test(f);
const library = sources(SRC).filter((f) => !isTest(f));
const under = (f: string, ...dirs: string[]): boolean => dirs.some((d) => f === d || f.startsWith(`${d}/`));

/**
 * Who may import whom, by folder: a file matching `from` must not import
 * anything matching `to`. Lower layers (store, http, fx, signal, durable)
 * never reach up into the app, the CLI or the project loader.
 */
const FORBIDDEN: Array<{ from: (f: string) => boolean; to: (f: string) => boolean; why: string }> = [
  {
    from: (f) =>
      !under(
        f,
        "src/app",
        "src/console",
        "src/cli",
        "src/project",
        "src/testing.ts",
        "src/vitest.ts",
        "src/index.ts",
      ),
    to: (f) => under(f, "src/app"),
    why: "only the composition root's callers import app/",
  },
  {
    from: (f) => !under(f, "src/cli"),
    to: (f) => under(f, "src/cli"),
    why: "nothing imports the CLI",
  },
  {
    from: (f) => !under(f, "src/cli", "src/project", "src/testing.ts", "src/vitest.ts"),
    to: (f) => under(f, "src/project"),
    why: "only the CLI, okengine/testing and okengine/vitest load projects",
  },
  {
    from: (f) => under(f, "src/store"),
    // okengine-version.ts is a leaf (it reads okengine's package.json): migrations record who applied them.
    to: (f) =>
      !under(
        f,
        "src/store",
        "src/errors.ts",
        "src/id.ts",
        "src/log",
        "src/clock/clock.ts",
        "src/okengine-version.ts",
      ),
    why: "drivers know only the Store contract",
  },
  {
    from: (f) => under(f, "src/http"),
    to: (f) => under(f, "src/fx", "src/durable", "src/app"),
    why: "HTTP sees the app only through HttpApp",
  },
];

// Migrations 0001–0014 import their type from the list that imports them; they are frozen as shipped,
// so they keep that import (new ones import ./migration.ts).
const FROZEN_MIGRATIONS = [
  "0001-initial",
  "0002-key-guard-batch",
  "0004-idempotency",
  "0005-compensating",
  "0006-schedules",
  "0007-fanout",
  "0008-console",
  "0010-run-retention",
  "0011-due-runs-by-flow",
  "0014-delivered-by-signal",
];
const MIGRATIONS = "src/store/postgres/migrations";
const KNOWN_TYPE_CYCLES: string[] = [
  "src/flow/flow.ts → src/fx/types.ts → src/flow/flow.ts",
  ...FROZEN_MIGRATIONS.map((m) => `${MIGRATIONS}/index.ts → ${MIGRATIONS}/${m}.ts → ${MIGRATIONS}/index.ts`),
];

describe("source structure", () => {
  it("no file imports a layer above its own", () => {
    const bad: string[] = [];
    for (const f of library)
      for (const i of importsOf(f))
        for (const rule of FORBIDDEN)
          if (rule.from(f) && rule.to(i.to)) bad.push(`${f} → ${i.to} (${rule.why})`);
    expect(bad).toEqual([]);
  });

  it("no import cycles between library files (value imports)", () => {
    expect(cyclesOf(false)).toEqual([]);
  });

  // Type-only cycles erase at runtime, so they cannot break module loading. The ones left are
  // mutually recursive vocabulary: a flow's body takes an Fx and fx.call takes a Flow; the
  // migration list names each migration's type while each migration imports the list's type.
  // Any other type cycle fails here: break it by moving the shared type down a layer.
  it("type-only import cycles are only the known mutual type references", () => {
    expect(cyclesOf(true)).toEqual(KNOWN_TYPE_CYCLES);
  });
});

/** Each import cycle once, as "a → b → … → a", found by depth-first search from every file in order. */
function cyclesOf(withTypes: boolean): string[] {
  const edges = new Map(
    library.map((f) => [
      f,
      importsOf(f)
        .filter((i) => withTypes || !i.typeOnly)
        .map((i) => i.to),
    ]),
  );
  const state = new Map<string, "open" | "done">();
  const stack: string[] = [];
  const cycles: string[] = [];
  const visit = (f: string): void => {
    state.set(f, "open");
    stack.push(f);
    for (const to of edges.get(f) ?? []) {
      if (!edges.has(to)) continue;
      if (state.get(to) === "open") cycles.push([...stack.slice(stack.indexOf(to)), to].join(" → "));
      else if (!state.has(to)) visit(to);
    }
    stack.pop();
    state.set(f, "done");
  };
  for (const f of library) if (!state.has(f)) visit(f);
  return cycles;
}
