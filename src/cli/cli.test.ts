// The oke binary as a real process: dev, start, routes and manifest on fixture projects.
import { spawn, type ChildProcess } from "node:child_process";
import { cpSync, mkdtempSync, rmSync, symlinkSync, writeFileSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { builtOke, withoutVitestEnv } from "../../test/support/built-oke.ts";

const REPO = fileURLToPath(new URL("../../", import.meta.url));
/** The CLI compiled once (test/support/built-oke.ts), so no command compiles okengine's sources through tsx first. */
let BIN = "";
beforeAll(async () => {
  BIN = await builtOke();
});
const BASIC = fileURLToPath(new URL("./fixtures/basic", import.meta.url));
const CONFLICT = fileURLToPath(new URL("./fixtures/conflict", import.meta.url));
const TREE = fileURLToPath(new URL("./fixtures/tree", import.meta.url));
const EFFECTS = fileURLToPath(new URL("./fixtures/effects", import.meta.url));
const CLOCKS = fileURLToPath(new URL("./fixtures/clocks", import.meta.url));

interface Oke {
  child: ChildProcess;
  lines: string[];
  /** Resolves with the first line (already printed or to come) matching `re` after index `from`. */
  line(re: RegExp, from?: number): Promise<string>;
  exit: Promise<number | null>;
}

const running: ChildProcess[] = [];
const temps: string[] = [];
afterEach(() => {
  for (const c of running.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
  for (const t of temps.splice(0)) rmSync(t, { recursive: true, force: true });
});

function oke(args: string[], env: Record<string, string | undefined> = {}): Oke {
  const base = withoutVitestEnv(process.env);
  delete base.DATABASE_URL;
  delete base.NODE_ENV;
  const child = spawn(process.execPath, [BIN, ...args], {
    cwd: REPO,
    env: { ...base, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  running.push(child);
  const lines: string[] = [];
  const waiters: Array<() => void> = [];
  let closed = false;
  const wake = (): void => {
    for (const w of waiters.splice(0)) w();
  };
  for (const stream of [child.stdout, child.stderr]) {
    createInterface({ input: stream }).on("line", (l) => {
      lines.push(l);
      wake();
    });
  }
  // "close" (not "exit"): every line the process printed has been read by then.
  const exit = new Promise<number | null>((r) =>
    child.once("close", (code) => {
      closed = true;
      wake();
      r(code);
    }),
  );
  const line = (re: RegExp, from = 0): Promise<string> =>
    new Promise((resolve, reject) => {
      const check = (): void => {
        const hit = lines.slice(from).find((l) => re.test(l));
        if (hit !== undefined) resolve(hit);
        else if (closed) reject(new Error(`oke exited before printing ${String(re)}:\n${lines.join("\n")}`));
        else waiters.push(check);
      };
      check();
    });
  return { child, lines, line, exit };
}

const portOf = (line: string): number => Number(/:(\d+) /.exec(line)![1]);

/** A copy of a fixture outside the repo, without its tsconfig: `@/`, `okengine` and zod must still resolve. */
function tempProject(fixture = BASIC): string {
  const dir = mkdtempSync(join(tmpdir(), "oke-cli-"));
  temps.push(dir);
  cpSync(fixture, dir, { recursive: true });
  rmSync(join(dir, "tsconfig.json"));
  symlinkSync(join(REPO, "node_modules"), join(dir, "node_modules"));
  return dir;
}

const postJson = (url: string, body: unknown) =>
  fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });

describe("oke routes / manifest", () => {
  it("prints the route table", async () => {
    const p = oke(["routes", BASIC]);
    expect(await p.exit).toBe(0);
    expect(p.lines.join("\n")).toBe(
      [
        "METHOD  PATH        FLOW",
        "POST    /greet      greet",
        "GET     /hello      hello",
        "GET     /users/:id  users.show",
      ].join("\n"),
    );
  });

  it("prints the manifest as JSON", async () => {
    const p = oke(["manifest", BASIC]);
    expect(await p.exit).toBe(0);
    const manifest = JSON.parse(p.lines.join("\n"));
    expect(manifest.routes).toEqual([
      { method: "POST", path: "/greet", flow: "greet" },
      { method: "GET", path: "/hello", flow: "hello" },
      { method: "GET", path: "/users/:id", flow: "users.show" },
    ]);
    expect(manifest.flows.find((f: { name: string }) => f.name === "greet")).toMatchObject({
      source: "src/flows/greet.ts#greet",
      triggers: ["POST /greet"],
    });
    expect(manifest.signals.map((s: { name: string }) => s.name)).toEqual(["greetings.greeted"]);
  });
});

describe("oke manifest lists clocks (fixtures/clocks)", () => {
  it("names each clock with its schedule, timezone, overlap and the flow it fires", async () => {
    const p = oke(["manifest", CLOCKS]);
    expect(await p.exit).toBe(0);
    const manifest = JSON.parse(p.lines.join("\n"));
    expect(manifest.clocks).toEqual([
      {
        name: "links.purgeOld",
        flow: "links.purgeOld",
        cron: null,
        every: "1h",
        timezone: "UTC",
        overlap: true,
        overridable: false,
        retries: 3,
        deadLetter: true,
        signal: "clock:links.purgeOld",
      },
      {
        name: "reports.daily",
        flow: "reports.daily",
        cron: "0 7 * * *",
        every: null,
        timezone: "Europe/Paris",
        overlap: false,
        overridable: true,
        retries: 3,
        deadLetter: true,
        description: "the morning report",
        signal: "clock:reports.daily",
      },
    ]);
    expect(manifest.flows.find((f: { name: string }) => f.name === "reports.daily")).toMatchObject({
      source: "src/flows/reports/daily.ts#daily",
      triggers: ["clock:reports.daily"],
    });
  });
});

describe("oke routes on a project that uses every file-tree rule (fixtures/tree)", () => {
  it("prints method, path and flow name for each rule", async () => {
    const p = oke(["routes", TREE]);
    expect(await p.exit).toBe(0);
    expect(p.lines.join("\n")).toBe(
      [
        "METHOD  PATH            FLOW",
        "GET     /               main.home", //        main/route.ts
        "GET     /files/*        files.read", //       files/[...slug].ts
        "GET     /healthz        health", //           health.ts, explicit path
        "GET     /notes          notes.recent", //     notes/index.ts
        "DELETE  /notes/:id      notes.remove", //     notes/[id]/remove.ts
        "GET     /notes/:id      notes.get", //        notes/[id]/get.ts
        "PATCH   /notes/:id      notes.update", //     notes/[id]/update.ts
        "GET     /ops/email-dlq  ops.list", //         ops/email-dlq.ts
        "GET     /orders         orders.list", //      orders/list.ts
        "POST    /orders         orders.create", //    orders/create.ts (shapes, signals, _money: no routes)
        "GET     /preview        drafts.preview", //   _drafts/preview.ts, explicit path
        "GET     /stats          stats", //            (admin)/stats.ts
        "POST    /trials/start   trials.start", //     trials/start.ts
      ].join("\n"),
    );
  });

  it("serves those routes", async () => {
    const p = oke(["start", TREE, "--port", "0"], { NODE_ENV: "test" });
    const base = `http://127.0.0.1:${portOf(await p.line(/^okengine listening on /))}`;
    expect(await (await fetch(`${base}/`)).json()).toEqual({ ok: true, data: "home" });
    const created = await postJson(`${base}/orders`, { userId: "u1", amount: 2 });
    expect(created.status).toBe(200);
    expect((await postJson(`${base}/orders`, { userId: "u1", amount: -1 })).status).toBe(422);
    expect(await (await fetch(`${base}/notes/42`)).json()).toEqual({ ok: true, data: { id: "42" } });
    expect((await fetch(`${base}/notes/42`, { method: "DELETE" })).status).toBe(204);
    expect((await fetch(`${base}/orders/shapes`)).status).toBe(404);
    expect((await fetch(`${base}/health`)).status).toBe(404);
    p.child.kill("SIGTERM");
    expect(await p.exit).toBe(0);
  });

  it("fails naming both files when two files answer one route", async () => {
    const dir = tempProject(TREE);
    writeFileSync(
      join(dir, "src/flows/orders/index.ts"),
      'import { flow, http, on } from "okengine";\nexport const place = on(http.post(), flow({ do: () => 1 }));\n',
    );
    const p = oke(["routes", dir]);
    expect(await p.exit).toBe(1);
    const out = p.lines.join("\n");
    expect(out).toContain(
      'Duplicate route POST /orders: bound by flows "orders.create" (src/flows/orders/create.ts#create) and "orders.place" (src/flows/orders/index.ts#place).',
    );
    expect(out).toContain("code: OKE1074");
  });

  it("fails naming both files and the fix when two flows end up with one name", async () => {
    const dir = tempProject(TREE);
    writeFileSync(
      join(dir, "src/flows/ops/jobs-dlq.ts"),
      'import { flow, http, on } from "okengine";\nexport const list = on(http.get(), flow({ do: () => [] }));\n',
    );
    const p = oke(["routes", dir]);
    expect(await p.exit).toBe(1);
    const out = p.lines.join("\n");
    expect(out).toContain(
      'Two different flows are named "ops.list" (src/flows/ops/email-dlq.ts#list and src/flows/ops/jobs-dlq.ts#list).',
    );
    expect(out).toContain("code: OKE1075");
    expect(out).toContain(
      'fix: Name one of them explicitly where it is declared: flow("ops.<other-name>", { ... }).',
    );
  });
});

describe("effects recorded from the source (fixtures/effects)", () => {
  it("oke manifest shows the signals each flow emits and whose dead letters it reads; hand-written effects win", async () => {
    const p = oke(["manifest", EFFECTS]);
    expect(await p.exit).toBe(0);
    const manifest = JSON.parse(p.lines.join("\n")) as {
      flows: Array<{ name: string; effects: { reads: string[]; emits: string[] } }>;
      signals: Array<{ name: string }>;
    };
    const effects = Object.fromEntries(
      manifest.flows.map((f) => [f.name, { reads: f.effects.reads, emits: f.effects.emits }]),
    );
    expect(effects).toEqual({
      // aliased named import
      "orders.create": { reads: [], emits: ["orders.placed"] },
      // a namespace import, and a relative import used in a top-level helper
      "orders.fulfill": { reads: [], emits: ["orders.audited", "tasks.email"] },
      "ops.list": { reads: ["signal:tasks.email"], emits: [] },
      // hand-written: only what it declares, although its code reads tasks.email
      "ops.jobs": { reads: ["signal:jobs.run"], emits: [] },
      "workers.email": { reads: [], emits: [] },
    });
  });

  it("a recorded read is allowed at run time; a hand-written effects is still enforced (OKE1001)", async () => {
    const p = oke(["start", EFFECTS, "--port", "0"], { NODE_ENV: "test" });
    const base = `http://127.0.0.1:${portOf(await p.line(/^okengine listening on /))}`;
    expect((await postJson(`${base}/orders`, {})).status).toBe(200);
    // orders.fulfill emits the mail, whose worker always fails: one dead letter.
    for (const deadline = Date.now() + 20_000; ;) {
      const res = await fetch(`${base}/ops/email-dlq`);
      expect(res.status).toBe(200);
      if (((await res.json()) as { data: number }).data === 1) break;
      if (Date.now() > deadline) throw new Error("no dead letter");
      await new Promise((r) => setTimeout(r, 100));
    }
    const denied = await fetch(`${base}/ops/jobs-dlq`);
    expect(denied.status).toBe(500);
    expect(((await denied.json()) as { error: { code: string } }).error.code).toBe("OKE1001");
    p.child.kill("SIGTERM");
    expect(await p.exit).toBe(0);
  });
});

describe("oke start", () => {
  it("serves the project on the printed port and stops on SIGTERM", async () => {
    const p = oke(["start", BASIC, "--port", "0"], { NODE_ENV: "test" });
    const port = portOf(await p.line(/^okengine listening on http:\/\/127\.0\.0\.1:\d+ \(test\)$/));
    const base = `http://127.0.0.1:${port}`;
    expect(await (await fetch(`${base}/hello`)).json()).toEqual({ ok: true, data: { greeting: "Hello" } });
    expect(await (await postJson(`${base}/greet`, { name: "ada" })).json()).toEqual({
      ok: true,
      data: { message: "Hello, ada" },
    });
    const bad = await postJson(`${base}/greet`, { name: "" });
    expect(bad.status).toBe(422);
    expect(
      ((await bad.json()) as { error: { details: Array<{ path: string }> } }).error.details[0]!.path,
    ).toBe("name");
    expect(await (await fetch(`${base}/users/42`)).json()).toEqual({ ok: true, data: { id: "42" } });
    expect((await fetch(`${base}/_/ready`)).status).toBe(200);
    // bodyLimit comes from the project's oke.config.ts (2048).
    expect((await postJson(`${base}/greet`, { name: "x".repeat(3000) })).status).toBe(413);
    p.child.kill("SIGTERM");
    expect(await p.exit).toBe(0);
  });

  it("waits for an unreachable database while /_/ready answers 503, and SIGTERM then exits 0", async () => {
    const dir = tempProject();
    writeFileSync(
      join(dir, "oke.config.ts"),
      `import { defineConfig } from "okengine";\nexport default defineConfig({ drivers: { journal: "postgres", send: "memory" }, database: { connectTimeoutMs: 60_000 }, console: { port: false } });\n`,
    );
    // Nothing listens on port 1: every connect is refused.
    const p = oke(["start", dir, "--port", "0"], {
      NODE_ENV: "production",
      DATABASE_URL: "postgres://postgres:secret@127.0.0.1:1/app",
    });
    const warn = await p.line(/the store at 127\.0\.0\.1:1\/app is unavailable/);
    expect(warn).not.toContain("secret");
    p.child.kill("SIGTERM");
    expect(await p.exit).toBe(0);
    expect(p.lines.join("\n")).not.toContain("oke boot:");
  });

  it("prints a boot error without a stack and exits 1", async () => {
    const p = oke(["start", CONFLICT, "--port", "0"], { NODE_ENV: "production" });
    expect(await p.exit).toBe(1);
    const out = p.lines.join("\n");
    expect(p.lines[0]).toBe('oke boot: journal driver "postgres" needs DATABASE_URL');
    expect(out).not.toMatch(/^\s+at /m);
  });

  it("reports an invalid declaration (OKE1071) with its fix", async () => {
    const p = oke(["start", CONFLICT, "--port", "0"], { NODE_ENV: "test" });
    expect(await p.exit).toBe(1);
    const out = p.lines.join("\n");
    expect(out).toContain('Once signal "jobs.run" is bound to more than one Flow (jobs.a, jobs.b).');
    expect(out).toContain("code: OKE1071");
    expect(out).toContain("fix: Use signal.broadcast");
    expect(out).not.toMatch(/^\s+at /m);
  });

  it("names the file that failed to load", async () => {
    const dir = tempProject();
    writeFileSync(join(dir, "src/flows/broken.ts"), 'throw new Error("kaput");\n');
    const p = oke(["routes", dir]);
    expect(await p.exit).toBe(1);
    expect(p.lines[0]).toBe("oke: cannot load src/flows/broken.ts: kaput");
  });

  it("refuses a project outside an ES module scope, saying what to add", async () => {
    const dir = tempProject();
    writeFileSync(join(dir, "package.json"), '{ "name": "cjs-app" }\n');
    const p = oke(["start", dir, "--port", "0"], { NODE_ENV: "test" });
    expect(await p.exit).toBe(1);
    expect(p.lines[0]).toBe(
      `oke: ${join(dir, "package.json")} must say "type": "module" (okengine projects are ES modules)`,
    );
  });
});

describe("oke dev", () => {
  it("restarts the app when a source file changes, and stops on SIGINT", async () => {
    const dir = tempProject();
    // The loader skips tests and declaration files: importing these would fail.
    writeFileSync(
      join(dir, "src/flows/hello.test.ts"),
      'throw new Error("test files must not be loaded");\n',
    );
    writeFileSync(join(dir, "src/flows/types.d.ts"), "declare const x: number;\n");

    const p = oke(["dev", dir, "--port", "0"]);
    const first = portOf(await p.line(/^okengine listening on .* \(dev\)$/));
    expect(await (await fetch(`http://127.0.0.1:${first}/hello`)).json()).toEqual({
      ok: true,
      data: { greeting: "Hello" },
    });

    let mark = p.lines.length;
    const words = join(dir, "src/lib/words.ts");
    writeFileSync(words, readFileSync(words, "utf8").replace("Hello", "Howdy"));
    const second = portOf(await p.line(/^okengine listening on .* \(dev\)$/, mark));
    expect(await (await fetch(`http://127.0.0.1:${second}/hello`)).json()).toEqual({
      ok: true,
      data: { greeting: "Howdy" },
    });

    mark = p.lines.length;
    writeFileSync(
      join(dir, "src/flows/bye.ts"),
      'import { flow, http, on } from "okengine";\nexport const bye = on(http.get(), flow({ do: () => "bye" }));\n',
    );
    const third = portOf(await p.line(/^okengine listening on .* \(dev\)$/, mark));
    expect(await (await fetch(`http://127.0.0.1:${third}/bye`)).json()).toEqual({ ok: true, data: "bye" });

    p.child.kill("SIGINT");
    expect(await p.exit).toBe(0);
    // The app child went with it: its port no longer answers.
    await expect(fetch(`http://127.0.0.1:${third}/_/health`)).rejects.toThrow();
  });
});
