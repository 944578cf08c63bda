// The oke binary as a real process: dev, start, routes and manifest on fixture projects.
import { spawn, type ChildProcess } from "node:child_process";
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { builtOke, withoutVitestEnv } from "../../test/support/built-oke.ts";
import { freePort } from "../../test/support/free-port.ts";

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
  /** Resolves with the first line (already printed or to come) matching `re` after index `from`; rejects after `ms`. */
  line(re: RegExp, from?: number, ms?: number): Promise<string>;
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
  // The deadline is generous (a busy machine is slow), and says what was printed when it passes.
  const line = (re: RegExp, from = 0, ms = 60_000): Promise<string> =>
    new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        settled = true;
        reject(new Error(`no line ${String(re)} within ${ms} ms:\n${lines.join("\n")}`));
      }, ms);
      let settled = false;
      const check = (): void => {
        if (settled) return;
        const hit = lines.slice(from).find((l) => re.test(l));
        if (hit !== undefined) {
          clearTimeout(timer);
          resolve(hit);
        } else if (closed) {
          clearTimeout(timer);
          reject(new Error(`oke exited before printing ${String(re)}:\n${lines.join("\n")}`));
        } else waiters.push(check);
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

  it("with OKE_DEBUG=1, prints the stack of what the project's own line threw, under the wrapper's", async () => {
    const dir = tempProject();
    writeFileSync(
      join(dir, "src/flows/broken.ts"),
      'import { http } from "okengine";\n\nexport const typo = (http as unknown as { gett(): unknown }).gett();\n',
    );
    const p = oke(["routes", dir], { OKE_DEBUG: "1" });
    expect(await p.exit).toBe(1);
    expect(p.lines[0]).toMatch(/^oke: cannot load src\/flows\/broken\.ts: .*gett is not a function$/);
    const out = p.lines.join("\n");
    expect(out).toMatch(/^Caused by: TypeError: .*gett is not a function$/m);
    // The user's file and line, as a frame of the cause's stack.
    expect(out).toMatch(/^\s+at .*src\/flows\/broken\.ts:3:\d+/m);
  });

  it("refuses a folder that is not a project (run from inside src/), naming the project above, and creates nothing", async () => {
    const dir = tempProject();
    const src = join(dir, "src");
    const runs = [oke(["routes", src]), oke(["dev", src, "--port", "0"], { OKE_CONSOLE_PORT: "0" })];
    expect(await Promise.all(runs.map((r) => r.exit))).toEqual([1, 1]);
    for (const r of runs)
      expect(r.lines[0]).toBe(
        `oke: ${src} is not a project folder: it has no package.json, oke.config.ts or src/; the project seems to be ${dir}: run oke there, or pass that folder`,
      );
    expect(existsSync(join(src, ".oke"))).toBe(false);
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

describe("oke doctor where there is no store", () => {
  it("exits 1 saying so, and creates nothing, for a missing directory, a missing --store, or --salvage", async () => {
    const dir = mkdtempSync(join(tmpdir(), "oke-doctor-none-"));
    temps.push(dir);
    const missing = join(dir, "nope");
    const runs = [
      oke(["doctor", missing]),
      oke(["doctor", "--salvage", missing]),
      oke(["doctor", dir, "--store", "nowhere"]),
      oke(["doctor", "--salvage", dir]),
    ];
    const codes = await Promise.all(runs.map((r) => r.exit));
    expect(codes).toEqual([1, 1, 1, 1]);
    expect(runs[0]!.lines).toEqual([`oke doctor: directory "${missing}" not found`]);
    expect(runs[1]!.lines).toEqual([`oke doctor: directory "${missing}" not found`]);
    expect(runs[2]!.lines).toEqual([
      `oke doctor: no file store at ${join(dir, "nowhere")}; nothing to check`,
    ]);
    expect(runs[3]!.lines[0]).toMatch(/^oke doctor: no file store at .*\.oke; nothing to check/);
    expect(existsSync(missing)).toBe(false);
    expect(existsSync(join(dir, "nowhere"))).toBe(false);
    expect(existsSync(join(dir, ".oke"))).toBe(false);
  });
});

/** Waits until the app `oke dev` runs now (its latest "listening" line) answers `path` with `data`. */
async function served(p: Oke, path: string, data: unknown, ms = 60_000): Promise<void> {
  const deadline = Date.now() + ms;
  let last: unknown;
  for (;;) {
    const listening = p.lines.filter((l) => /^okengine listening on .* \(dev\)$/.test(l)).at(-1);
    if (listening !== undefined) {
      try {
        const res = await fetch(`http://127.0.0.1:${portOf(listening)}${path}`);
        last = await res.json();
        if (JSON.stringify(last) === JSON.stringify({ ok: true, data })) return;
      } catch (e) {
        last = e; // between two processes: the old one is gone, the new one not up yet
      }
    }
    if (Date.now() > deadline)
      throw new Error(
        `GET ${path} never answered ${JSON.stringify(data)} (last: ${String(JSON.stringify(last))}):\n${p.lines.join("\n")}`,
      );
    await new Promise((r) => setTimeout(r, 100));
  }
}

const helloFlow = (greeting: string): string =>
  `import { flow, http, on } from "okengine";\nexport const hello = on(http.get(), flow({ do: () => ({ greeting: ${JSON.stringify(greeting)} }) }));\n`;

/** Saves as many editors do ("safe write"): a temp file beside it, renamed over it, so the file is a new inode. */
function saveByRename(file: string, text: string): void {
  const tmp = `${file}.oke-test-tmp`;
  writeFileSync(tmp, text);
  renameSync(tmp, file);
}

describe("a second oke dev on the same project", { timeout: 120_000 }, () => {
  it("says which process holds the file store, with the code and a fix", async () => {
    const dir = tempProject();
    const config = join(dir, "oke.config.ts");
    writeFileSync(config, readFileSync(config, "utf8").replace('journal: "memory"', 'journal: "file"'));
    const first = oke(["dev", dir, "--port", "0"], { OKE_CONSOLE_PORT: "0" });
    await first.line(/^okengine listening on .* \(dev\)$/);
    const second = oke(["dev", dir, "--port", "0"], { OKE_CONSOLE_PORT: "0" });
    const locked = await second.line(/^oke boot: File store ".*" is locked by process \d+\.$/);
    const pid = /process (\d+)/.exec(locked)![1]!;
    await second.line(/^ {2}code: OKE1320$/);
    await second.line(
      new RegExp(
        `^ {2}fix: Stop process ${pid} \\(in this or another container sharing the directory\\) or point this app at another directory\\.`,
      ),
    );
    await second.line(/^oke dev: app exited \(code 1\); waiting for a change to restart$/);
    for (const p of [second, first]) {
      p.child.kill("SIGINT");
      expect(await p.exit).toBe(0);
    }
  });
});

// One `oke dev` per case, each through many restarts (an app process apiece): the restarts on a
// source file's change and the stop on SIGINT share the first case's.
describe("oke dev watches what the app is made of", { timeout: 240_000 }, () => {
  it("restarts the app when a source file changes: edited, added, replaced by rename, edited in place, touched; a boot error fixed by an in-place save restarts; stops on SIGINT", async () => {
    const dir = tempProject();
    // The loader skips tests and declaration files: importing these would fail.
    writeFileSync(
      join(dir, "src/flows/hello.test.ts"),
      'throw new Error("test files must not be loaded");\n',
    );
    writeFileSync(join(dir, "src/flows/types.d.ts"), "declare const x: number;\n");

    const hello = join(dir, "src/flows/hello.ts");
    const p = oke(["dev", dir, "--port", "0"], { OKE_CONSOLE_PORT: "0" });
    const first = portOf(await p.line(/^okengine listening on .* \(dev\)$/));
    expect(await (await fetch(`http://127.0.0.1:${first}/hello`)).json()).toEqual({
      ok: true,
      data: { greeting: "Hello" },
    });

    // A module the flow imports (src/lib), edited in place.
    let mark = p.lines.length;
    const words = join(dir, "src/lib/words.ts");
    writeFileSync(words, readFileSync(words, "utf8").replace("Hello", "Howdy"));
    const second = portOf(await p.line(/^okengine listening on .* \(dev\)$/, mark));
    expect(await (await fetch(`http://127.0.0.1:${second}/hello`)).json()).toEqual({
      ok: true,
      data: { greeting: "Howdy" },
    });

    // A new file in a folder watched from the start.
    mark = p.lines.length;
    writeFileSync(
      join(dir, "src/flows/bye.ts"),
      'import { flow, http, on } from "okengine";\nexport const bye = on(http.get(), flow({ do: () => "bye" }));\n',
    );
    const third = portOf(await p.line(/^okengine listening on .* \(dev\)$/, mark));
    expect(await (await fetch(`http://127.0.0.1:${third}/bye`)).json()).toEqual({ ok: true, data: "bye" });

    saveByRename(hello, helloFlow("renamed"));
    await served(p, "/hello", { greeting: "renamed" });

    // The same file, written in place now: on Linux a recursive fs.watch lost it at the rename.
    writeFileSync(hello, helloFlow("in place"));
    await served(p, "/hello", { greeting: "in place" });

    mark = p.lines.length;
    const now = new Date();
    utimesSync(hello, now, now);
    await p.line(/^okengine listening on .* \(dev\)$/, mark);

    // A boot error (the file no longer loads), fixed by an in-place save, after another rename.
    mark = p.lines.length;
    saveByRename(hello, 'throw new Error("kaput");\n');
    await p.line(/^oke: cannot load src\/flows\/hello\.ts: kaput$/, mark);
    await p.line(/^oke dev: app exited \(code 1\); waiting for a change to restart$/, mark);
    writeFileSync(hello, helloFlow("fixed"));
    await served(p, "/hello", { greeting: "fixed" });

    // A folder created after the start is watched too.
    mkdirSync(join(dir, "src/flows/later"));
    writeFileSync(join(dir, "src/flows/later/bye.ts"), helloFlow("bye").replace("hello", "bye"));
    await served(p, "/later/bye", { greeting: "bye" });
    writeFileSync(join(dir, "src/flows/later/bye.ts"), helloFlow("bye again").replace("hello", "bye"));
    await served(p, "/later/bye", { greeting: "bye again" });

    const last = portOf(p.lines.filter((l) => /^okengine listening on .* \(dev\)$/.test(l)).at(-1)!);
    p.child.kill("SIGINT");
    expect(await p.exit).toBe(0);
    // The app child went with it: its port no longer answers.
    await expect(fetch(`http://127.0.0.1:${last}/_/health`)).rejects.toThrow();
  });

  it("does not restart for the tests the loader skips (*.test.ts, *.spec.ts, __tests__/, __mocks__/), however saved; a flow's change still restarts", async () => {
    const dir = tempProject();
    const hello = join(dir, "src/flows/hello.ts");
    const p = oke(["dev", dir, "--port", "0"], { OKE_CONSOLE_PORT: "0" });
    await served(p, "/hello", { greeting: "Hello" });
    const mark = p.lines.length;
    writeFileSync(join(dir, "src/flows/hello.test.ts"), "export {};\n");
    writeFileSync(join(dir, "src/flows/hello.test.ts"), "export const edited = 1;\n");
    saveByRename(join(dir, "src/flows/hello.spec.ts"), "export {};\n");
    mkdirSync(join(dir, "src/flows/__tests__"));
    writeFileSync(join(dir, "src/flows/__tests__/hello.ts"), "export {};\n");
    mkdirSync(join(dir, "src/lib/__mocks__"));
    writeFileSync(join(dir, "src/lib/__mocks__/words.ts"), "export {};\n");
    // Nothing to wait for when nothing restarts: this pause (20 debounces) is the old watcher's
    // chance to restart on them, so that the count below would catch it. The count does not depend on it.
    await new Promise((r) => setTimeout(r, 2_000));
    writeFileSync(hello, helloFlow("after the tests"));
    await served(p, "/hello", { greeting: "after the tests" });
    expect(p.lines.slice(mark).filter((l) => l === "oke dev: change detected, restarting")).toEqual([
      "oke dev: change detected, restarting",
    ]);
    p.child.kill("SIGINT");
    expect(await p.exit).toBe(0);
  });

  it("restarts on package.json, tsconfig.json and oke.config.ts, however they are saved", async () => {
    const dir = tempProject();
    const pkgFile = join(dir, "package.json");
    const pkgText = readFileSync(pkgFile, "utf8");
    // A flow exported without on(…): dev says so (once per boot).
    writeFileSync(
      join(dir, "src/flows/forgot.ts"),
      'import { flow } from "okengine";\nexport const forgot = flow({ do: () => 1 });\n',
    );
    const p = oke(["dev", dir, "--port", "0"], { OKE_CONSOLE_PORT: "0" });
    await served(p, "/hello", { greeting: "Hello" });
    await p.line(/WARN.*flow "forgot" \(src\/flows\/forgot\.ts#forgot\) is exported without on\(…\)/);

    // What `oke` itself tells the user to fix, in package.json.
    let mark = p.lines.length;
    writeFileSync(pkgFile, '{ "name": "cjs-app" }\n');
    await p.line(/must say "type": "module"/, mark);
    await p.line(/^oke dev: app exited \(code 1\)/, mark);
    mark = p.lines.length;
    writeFileSync(pkgFile, pkgText);
    await p.line(/^okengine listening on .* \(dev\)$/, mark);

    // tsconfig.json's paths decide what `@/…` and other aliases resolve to.
    mark = p.lines.length;
    saveByRename(join(dir, "tsconfig.json"), '{ "compilerOptions": { "strict": true } }\n');
    await p.line(/^okengine listening on .* \(dev\)$/, mark);

    // The config, saved by rename and then in place: bodyLimit 2048 → 10 → 2048.
    const config = join(dir, "oke.config.ts");
    const configText = readFileSync(config, "utf8");
    saveByRename(config, configText.replace("bodyLimit: 2048", "bodyLimit: 10"));
    await served(p, "/hello", { greeting: "Hello" });
    const status = async (): Promise<number> => {
      const listening = p.lines.filter((l) => /^okengine listening on .* \(dev\)$/.test(l)).at(-1)!;
      return (await postJson(`http://127.0.0.1:${portOf(listening)}/greet`, { name: "ada lovelace" })).status;
    };
    for (const deadline = Date.now() + 60_000; (await status().catch(() => 0)) !== 413;) {
      if (Date.now() > deadline) throw new Error(`bodyLimit 10 never applied:\n${p.lines.join("\n")}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    writeFileSync(config, configText);
    for (const deadline = Date.now() + 60_000; (await status().catch(() => 0)) !== 200;) {
      if (Date.now() > deadline) throw new Error(`bodyLimit 2048 never back:\n${p.lines.join("\n")}`);
      await new Promise((r) => setTimeout(r, 100));
    }

    p.child.kill("SIGINT");
    expect(await p.exit).toBe(0);
  });
});

describe("oke dev --inspect", { timeout: 120_000 }, () => {
  const debugFlow =
    'import inspector from "node:inspector";\nimport { flow, http, on } from "okengine";\n' +
    "export const debug = on(http.get(), flow({ do: () => ({ url: inspector.url() ?? null, execArgv: process.execArgv }) }));\n";

  it("opens the inspector in the app's process, not in the supervisor's, again after a restart", async () => {
    const dir = tempProject();
    writeFileSync(join(dir, "src/flows/debug.ts"), debugFlow);
    const p = oke(["dev", dir, "--port", "0", "--inspect=127.0.0.1:0"], { OKE_CONSOLE_PORT: "0" });
    const port = portOf(await p.line(/^okengine listening on .* \(dev\)$/));
    const seen = (await (await fetch(`http://127.0.0.1:${port}/debug`)).json()) as {
      data: { url: string | null; execArgv: string[] };
    };
    expect(seen.data.execArgv).toContain("--inspect=127.0.0.1:0");
    expect(seen.data.url).toMatch(/^ws:\/\/127\.0\.0\.1:\d+\//);
    // One inspector, the app's: Node prints this line for each process that opens one.
    expect(p.lines.filter((l) => l.startsWith("Debugger listening on ")).length).toBe(1);

    const mark = p.lines.length;
    writeFileSync(join(dir, "src/flows/debug.ts"), `${debugFlow}// changed\n`);
    const again = portOf(await p.line(/^okengine listening on .* \(dev\)$/, mark));
    const after = (await (await fetch(`http://127.0.0.1:${again}/debug`)).json()) as {
      data: { url: string | null };
    };
    expect(after.data.url).toMatch(/^ws:\/\/127\.0\.0\.1:\d+\//);
    p.child.kill("SIGINT");
    expect(await p.exit).toBe(0);
  });

  it("with --inspect in NODE_OPTIONS, the app still starts and the supervisor says to use --inspect", async () => {
    const dir = tempProject();
    writeFileSync(join(dir, "src/flows/debug.ts"), debugFlow);
    // A fixed port, as 9229 is: the supervisor takes it first.
    const inspectPort = await freePort();
    const p = oke(["dev", dir, "--port", "0"], {
      OKE_CONSOLE_PORT: "0",
      NODE_OPTIONS: `--inspect=127.0.0.1:${inspectPort}`,
    });
    await p.line(/^oke dev: the app's process ignores --inspect in NODE_OPTIONS: .*`oke dev --inspect`/);
    const port = portOf(await p.line(/^okengine listening on .* \(dev\)$/));
    const seen = (await (await fetch(`http://127.0.0.1:${port}/debug`)).json()) as {
      data: { url: string | null };
    };
    expect(seen.data.url).toBeNull();
    expect(p.lines.join("\n")).not.toContain("address already in use");
    p.child.kill("SIGINT");
    expect(await p.exit).toBe(0);
  });
});
