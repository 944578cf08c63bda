/** Reads a flow file's source and records, per export, the signals it emits and whose dead letters it reads. */
import { existsSync, readFileSync, statSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { tsPlugin } from "@sveltejs/acorn-typescript";
import { Parser } from "acorn";
import type { SourceEffects } from "../app/types.ts";
import { isSignal, type SignalHandle } from "../signal/signal.ts";
import type { PathAliases } from "./tsconfig-paths.ts";

// acorn + acorn-typescript: 0.8 MB installed and pure JS; docs/architecture.md has the comparison.
const TsParser = Parser.extend(tsPlugin());

/** An ESTree node, loosely: the walker only reads `type` and a few fields. */
interface Node {
  type: string;
  [k: string]: unknown;
}

const isNode = (v: unknown): v is Node =>
  typeof v === "object" && v !== null && typeof (v as { type?: unknown }).type === "string";

/** Every node below `node`, depth first. */
function* walk(node: unknown): Generator<Node> {
  if (Array.isArray(node)) {
    for (const n of node) yield* walk(n);
    return;
  }
  if (!isNode(node)) return;
  yield node;
  for (const [k, v] of Object.entries(node)) if (k !== "loc" && typeof v === "object") yield* walk(v);
}

const idName = (n: unknown): string | undefined =>
  isNode(n) && n.type === "Identifier" ? (n.name as string) : undefined;

interface Scan {
  /** Local name → where it is imported from (`"*"`: a namespace import). */
  imports: Map<string, { source: string; imported: string }>;
  /** Top-level declaration name → its node. */
  decls: Map<string, Node>;
  /** Export name → the top-level declaration it names. */
  exported: Map<string, string>;
}

function scan(program: Node): Scan {
  const s: Scan = { imports: new Map(), decls: new Map(), exported: new Map() };
  const declare = (stmt: Node, exportAll: boolean): void => {
    if (stmt.type === "VariableDeclaration") {
      for (const d of stmt.declarations as Node[]) {
        const name = idName(d.id);
        if (name === undefined) continue;
        s.decls.set(name, d);
        if (exportAll) s.exported.set(name, name);
      }
    } else if (stmt.type === "FunctionDeclaration" || stmt.type === "ClassDeclaration") {
      const name = idName(stmt.id);
      if (name !== undefined) {
        s.decls.set(name, stmt);
        if (exportAll) s.exported.set(name, name);
      }
    }
  };
  for (const stmt of program.body as Node[]) {
    if (stmt.type === "ImportDeclaration") {
      const source = (stmt.source as Node).value as string;
      for (const sp of stmt.specifiers as Node[]) {
        const local = idName(sp.local)!;
        const imported =
          sp.type === "ImportNamespaceSpecifier"
            ? "*"
            : sp.type === "ImportDefaultSpecifier"
              ? "default"
              : (idName(sp.imported) ?? ((sp.imported as Node).value as string));
        s.imports.set(local, { source, imported });
      }
    } else if (stmt.type === "ExportNamedDeclaration") {
      if (isNode(stmt.declaration)) declare(stmt.declaration, true);
      else if (stmt.source === null || stmt.source === undefined) {
        for (const sp of stmt.specifiers as Node[]) {
          const local = idName(sp.local);
          const as = idName(sp.exported) ?? ((sp.exported as Node).value as string);
          if (local !== undefined) s.exported.set(as, local);
        }
      }
    } else if (stmt.type === "ExportDefaultDeclaration") {
      const d = stmt.declaration as Node;
      const ref = idName(d);
      if (ref !== undefined) s.exported.set("default", ref);
      else {
        s.decls.set("default", d);
        s.exported.set("default", "default");
      }
    } else declare(stmt, false);
  }
  return s;
}

type HandleExpr = Node;

/** What one top-level declaration does directly: its emit / deadLetters handles, and the names it uses. */
function usesOf(decl: Node): { emits: HandleExpr[]; reads: HandleExpr[]; refs: Set<string> } {
  const out = { emits: [] as HandleExpr[], reads: [] as HandleExpr[], refs: new Set<string>() };
  for (const n of walk(decl)) {
    if (n.type === "Identifier") out.refs.add(n.name as string);
    if (n.type !== "CallExpression") continue;
    const callee = n.callee as Node;
    if (callee.type !== "MemberExpression" || callee.computed === true) continue;
    const method = idName(callee.property);
    const first = (n.arguments as Node[])[0];
    if (first === undefined) continue;
    if (method === "emit") out.emits.push(first);
    else if (method === "deadLetters") out.reads.push(first);
  }
  return out;
}

/** Resolves an import specifier of `fromFile` to a project file, or undefined (a package, or not found). */
export function resolveSpecifier(
  root: string,
  fromFile: string,
  spec: string,
  aliases: PathAliases,
): string | undefined {
  let bases: string[] = [];
  if (spec.startsWith("./") || spec.startsWith("../")) bases = [resolve(dirname(fromFile), spec)];
  else if (spec.startsWith("@/")) bases = [join(root, "src", spec.slice(2))];
  if (aliases.exact[spec]) bases = aliases.exact[spec].map((u) => fileURLToPath(u));
  for (const p of aliases.patterns) {
    if (
      spec.startsWith(p.prefix) &&
      spec.endsWith(p.suffix) &&
      spec.length >= p.prefix.length + p.suffix.length
    ) {
      const star = spec.slice(p.prefix.length, spec.length - p.suffix.length);
      bases = p.targets.map((t) => fileURLToPath(t.replace("*", star)));
      break;
    }
  }
  for (const base of bases) {
    const stem = base.replace(/\.(m?js)$/, "");
    for (const f of [base, `${stem}.ts`, `${stem}.mts`, `${base}.js`, join(base, "index.ts")]) {
      if (existsSync(f) && statSync(f).isFile()) return f;
    }
  }
  return undefined;
}

const parseFile = (file: string): Node | undefined => {
  try {
    return TsParser.parse(readFileSync(file, "utf8"), {
      sourceType: "module",
      ecmaVersion: "latest",
    }) as unknown as Node;
  } catch {
    // tsx already loaded the file, so this is syntax the parser lacks: nothing is recorded for it.
    return undefined;
  }
};

/**
 * The export names `file` (absolute) declares itself: `export const x`, `export function`,
 * `export default …`, `export { local }`. Not those it takes from another module
 * (`export * from`, `export { x } from`, an imported name exported again). Undefined when the
 * file cannot be parsed.
 */
export function declaredExports(file: string): Set<string> | undefined {
  const program = parseFile(file);
  if (program === undefined) return undefined;
  const s = scan(program);
  return new Set([...s.exported].filter(([, local]) => s.decls.has(local)).map(([name]) => name));
}

/**
 * For each export of `file` (absolute), the signals its code emits
 * (`fx.emit(handle, …)`) and whose dead letters it reads (`fx.deadLetters(handle)`),
 * following the top-level functions and constants it uses. Handles are
 * resolved through the module's imports (loaded, so their `.name` is exact),
 * its own exports, or a local `signal.once("name")`. A handle that cannot be
 * resolved statically (a parameter, a computed value) is not recorded.
 */
export async function recordSourceEffects(
  root: string,
  file: string,
  ownExports: Record<string, unknown>,
  aliases: PathAliases,
): Promise<Record<string, SourceEffects>> {
  // Unparsable: nothing is recorded for it, and hand-written effects keep working.
  const program = parseFile(file);
  if (program === undefined) return {};
  const s = scan(program);
  const uses = new Map([...s.decls].map(([name, d]) => [name, usesOf(d)]));
  const modules = new Map<string, Promise<Record<string, unknown> | undefined>>();
  const load = (source: string): Promise<Record<string, unknown> | undefined> => {
    let m = modules.get(source);
    if (m === undefined) {
      const target = resolveSpecifier(root, file, source, aliases);
      m =
        target === undefined
          ? Promise.resolve(undefined)
          : (import(pathToFileURL(target).href) as Promise<Record<string, unknown>>).catch(() => undefined);
      modules.set(source, m);
    }
    return m;
  };

  const resolveHandle = async (expr: HandleExpr): Promise<SignalHandle | undefined> => {
    const asSignal = (v: unknown): SignalHandle | undefined => (isSignal(v) ? v : undefined);
    if (expr.type === "MemberExpression" && expr.computed !== true) {
      const ns = idName(expr.object);
      const prop = idName(expr.property);
      const imp = ns === undefined ? undefined : s.imports.get(ns);
      if (imp?.imported !== "*" || prop === undefined) return undefined;
      return asSignal((await load(imp.source))?.[prop]);
    }
    const name = idName(expr);
    if (name === undefined) return undefined;
    const imp = s.imports.get(name);
    if (imp !== undefined) {
      const mod = await load(imp.source);
      return asSignal(imp.imported === "*" ? undefined : mod?.[imp.imported]);
    }
    const asExport = [...s.exported].find(([, local]) => local === name)?.[0];
    if (asExport !== undefined && isSignal(ownExports[asExport])) return ownExports[asExport];
    return undefined;
  };

  const out: Record<string, SourceEffects> = {};
  for (const [exportName, local] of s.exported) {
    // The declaration and every top-level declaration it reaches through the names it uses.
    const seen = new Set<string>();
    const queue = [local];
    const emits: SignalHandle[] = [];
    const reads: SignalHandle[] = [];
    while (queue.length > 0) {
      const name = queue.shift()!;
      const u = uses.get(name);
      if (u === undefined || seen.has(name)) continue;
      seen.add(name);
      for (const e of u.emits) {
        const h = await resolveHandle(e);
        if (h !== undefined && !emits.includes(h)) emits.push(h);
      }
      for (const e of u.reads) {
        const h = await resolveHandle(e);
        if (h !== undefined && !reads.includes(h)) reads.push(h);
      }
      for (const r of u.refs) if (r !== name && uses.has(r)) queue.push(r);
    }
    if (emits.length > 0 || reads.length > 0) out[exportName] = { emits, reads };
  }
  return out;
}
