// Lifecycle logs: boot says what the app serves, stop says it stopped and what it left.
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { pino } from "pino";
import { prettyFactory } from "pino-pretty";
import { describe, expect, it } from "vitest";
import { createApp, createTimeTravel, flow, http, on, signal } from "../index.ts";
import { PRETTY_OPTIONS } from "../log/logger.ts";
import { createFileStore } from "../store/file/file-store.ts";
import { createMemoryStore } from "../store/memory/memory-store.ts";

function captured(level: string) {
  const lines: Array<{ level: number; msg: string } & Record<string, unknown>> = [];
  const raw: string[] = [];
  const logger = pino(
    { level },
    {
      write: (l: string) => {
        raw.push(l);
        lines.push(JSON.parse(l));
      },
    },
  );
  return { logger, lines, raw, msgs: () => lines.map((l) => l.msg) };
}

const task = signal.once("tasks.mail");
const worker = on(task, flow("workers.mail", { do: () => undefined }));
const trial = on(
  http.post("/trials/start"),
  flow("trials.start", {
    durable: true,
    do: async (_: unknown, fx) => {
      await fx.clock.sleep("window", "1h");
    },
  }),
);

describe("lifecycle logs", () => {
  it("boot says what the app serves; stop says it stopped and what it left", async () => {
    const { logger, msgs } = captured("info");
    const app = createApp({
      env: "test",
      modules: [{ task, worker, trial }],
      store: createMemoryStore(),
      logger,
    });
    await app.boot();
    const serves = msgs().find((m) => m.startsWith("okengine serves"));
    expect(serves).toBe(
      [
        "okengine serves 1 route(s), 1 worker(s), 1 durable flow(s)",
        "  routes:",
        "    POST /trials/start → trials.start",
        "  workers:",
        "    tasks.mail (once) → workers.mail",
        "  durable flows:",
        "    trials.start",
      ].join("\n"),
    );
    expect(msgs()).toContain("okengine: queues and runs in memory (lost on exit)");
    await app.stop();
    expect(msgs().at(-1)).toBe("okengine stopped: nothing left running");
  });

  it("an app that serves nothing says where flows come from and what makes one count, in one line", async () => {
    const lonely = flow("lonely", { do: () => undefined });
    const said: string[] = [];
    for (const modules of [[], [{ lonely }]]) {
      const { logger, msgs } = captured("info");
      const app = createApp({ env: "test", modules, store: createMemoryStore(), logger });
      await app.boot();
      await app.stop();
      said.push(msgs().find((m) => m.startsWith("okengine: the app declares"))!);
    }
    const nothing =
      "okengine: the app declares no routes, workers, clocks or durable flows. " +
      "oke loads src/signals/, src/channels/ and src/flows/ (not tests); createApp, the modules it is given. " +
      "A flow counts once bound with on(trigger, flow(…)) and exported: " +
      "export const hello = on(http.get(), flow({ … })) in src/flows/hello.ts serves GET /hello";
    expect(said).toEqual([nothing, `${nothing}. 1 flow(s) are exported without on(…)`]);
    expect(said.some((m) => m.includes("\n"))).toBe(false);
  });

  it("an instance whose role serves none of the app's bound flows says so, not that the app declares none", async () => {
    const hello = on(http.get("/hello"), flow("hello", { do: () => "hi" }));
    const { logger, msgs } = captured("info");
    const app = createApp({
      env: "test",
      role: "worker",
      modules: [{ hello }],
      store: createMemoryStore(),
      logger,
    });
    await app.boot();
    await app.stop();
    expect(msgs()).toContain(
      "okengine: this instance serves none of the app's 1 bound flow(s): its role leaves them to instances of another role",
    );
    expect(msgs().some((m) => m.includes("declares no"))).toBe(false);
  });

  it("the boot line's counts are a field for JSON logs; readable logs (dev) do not print them again under the lists", async () => {
    const { logger, lines, raw } = captured("info");
    const app = createApp({
      env: "test",
      modules: [{ task, worker, trial }],
      store: createMemoryStore(),
      logger,
    });
    await app.boot();
    await app.stop();
    const at = lines.findIndex((l) => l.msg.startsWith("okengine serves"));
    expect(lines[at]!.serves).toEqual({ routes: 1, workers: 1, clocks: 0, durableFlows: ["trials.start"] });
    const readable = prettyFactory({ ...PRETTY_OPTIONS, colorize: false })(raw[at]!);
    expect(readable).toContain("    tasks.mail (once) → workers.mail");
    expect(readable).not.toMatch(/routes: 1|workers: 1|clocks: 0|durableFlows|serves:/);
  });

  it("names a file store handed to createApp as such, not the config's directory it does not use", async () => {
    const { logger, msgs } = captured("info");
    const dir = mkdtempSync(join(tmpdir(), "oke-given-"));
    const app = createApp({
      env: "test",
      modules: [{ task, worker }],
      store: createFileStore({ dir }),
      logger,
    });
    try {
      await app.boot();
      expect(msgs()).toContain("okengine: queues and runs in the file store given to createApp");
      expect(msgs().some((m) => m.includes(".oke"))).toBe(false);
    } finally {
      await app.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("a stop that cuts off durable runs and message handlers counts both", async () => {
    const { logger, msgs } = captured("info");
    let release: () => void = () => undefined;
    const held = new Promise<void>((r) => (release = r));
    let entered = 0;
    const started: Array<() => void> = [];
    const enteredTwo = new Promise<void>((r) => started.push(r));
    const enter = (): void => {
      if (++entered === 2) started[0]!();
    };
    const slowTask = signal.once("tasks.slow");
    const slowWorker = on(
      slowTask,
      flow("workers.slow", {
        do: async () => {
          enter();
          await held;
        },
      }),
    );
    const slowRun = on(
      http.post("/slow"),
      flow("runs.slow", {
        durable: true,
        do: async (_: unknown, fx) => {
          await fx.step("wait", async () => {
            enter();
            await held;
          });
        },
      }),
    );
    const app = createApp({
      env: "test",
      modules: [{ slowTask, slowWorker, slowRun }],
      store: createMemoryStore(),
      logger,
    });
    await app.boot();
    await app.emit(slowTask, undefined);
    const request = app.request("/slow", { method: "POST" });
    await enteredTwo;
    await app.stop({ timeoutMs: 1 });
    expect(msgs().at(-1)).toBe(
      "okengine stopped: 1 message handler(s) were still running; their messages are claimed again once their 30000 ms lease runs out. " +
        "1 durable run(s) were still running; they resume from their journal (on another instance, or at the next boot) once their 30000 ms lease runs out",
    );
    release();
    await request.catch(() => undefined);
  });

  it("durable runs log start, park, wake and finish at debug level", async () => {
    const { logger, msgs } = captured("debug");
    const time = createTimeTravel(0);
    const app = createApp({
      env: "test",
      modules: [{ trial }],
      store: createMemoryStore(),
      logger,
      clock: time,
    });
    await app.boot();
    await app.request("/trials/start", { method: "POST" });
    const [run] = await app.operator.runs({ status: "sleeping" });
    time.advance("1h");
    await app.idle();
    const runLines = msgs().filter((m) => m.startsWith("durable run"));
    expect(runLines).toEqual([
      `durable run ${run!.id} (trials.start): started`,
      `durable run ${run!.id} (trials.start): parked until 1970-01-01T01:00:00.000Z`,
      `durable run ${run!.id} (trials.start): woke from sleep "window", resuming after 1 journaled entries`,
      `durable run ${run!.id} (trials.start): finished, completed`,
    ]);
    await app.stop();
  });

  it("the pretty logger shows a field called name as a field, not as the logger's name", () => {
    const dir = mkdtempSync(join(tmpdir(), "oke-log-"));
    const file = join(dir, "log.ts");
    const logger = fileURLToPath(new URL("../log/logger.ts", import.meta.url));
    writeFileSync(
      file,
      `import { createLogger } from ${JSON.stringify(logger)};\ncreateLogger({ format: "pretty" }).info({ name: "ada" }, "signed up");\n`,
    );
    const out = execFileSync(process.execPath, ["--import", "tsx", file], {
      env: { ...process.env, NO_COLOR: "1", OKE_LOG_LEVEL: "info" },
      encoding: "utf8",
    });
    rmSync(dir, { recursive: true, force: true });
    expect(out).toContain("INFO: signed up");
    expect(out).toContain('name : "ada"');
    expect(out).not.toContain("(ada)");
  });
});
