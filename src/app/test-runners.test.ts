// What test runners need of an app in tests: node:test ends when the tests do, idle() waits for app.request, fake timers do not hang idle().
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { describe, expect, it, vi } from "vitest";
import { gate } from "../../test/conformance/app-fixture.ts";
import { isOkeError } from "../errors.ts";
import { createApp, flow, http, on, signal } from "../index.ts";
import { createMemoryStore } from "../store/memory/memory-store.ts";

const TESTING = pathToFileURL(new URL("../testing.ts", import.meta.url).pathname).href;

describe("apps under test runners", () => {
  it("under node:test, a test that fails before app.stop() ends the run with a failure instead of hanging it", async () => {
    const dir = mkdtempSync(join(tmpdir(), "oke-node-test-"));
    let child: ReturnType<typeof spawn> | undefined;
    try {
      const file = join(dir, "fails.test.ts");
      writeFileSync(
        file,
        [
          'import { test } from "node:test";',
          'import assert from "node:assert/strict";',
          `import { createTestApp } from ${JSON.stringify(TESTING)};`,
          'test("fails before stop", async () => {',
          "  const app = await createTestApp({ modules: [] });",
          "  assert.equal(1, 2);",
          "  await app.stop();",
          "});",
          "",
        ].join("\n"),
      );
      child = spawn(process.execPath, ["--import", "tsx", "--test", file], {
        cwd: new URL("../..", import.meta.url).pathname,
        stdio: ["ignore", "pipe", "pipe"],
      });
      let out = "";
      child.stdout?.on("data", (c: Buffer) => (out += c.toString()));
      child.stderr?.on("data", (c: Buffer) => (out += c.toString()));
      // Bounded by the test's own timeout: a hung run never exits and fails it.
      const running = child;
      const code = await new Promise<number | null>((r) => running.on("exit", r));
      expect(code, out).toBe(1);
      expect(out).toMatch(/not ok 1 - fails before stop/);
    } finally {
      // A run that hung (the defect) must not outlive the test.
      if (child?.exitCode === null) child.kill("SIGKILL");
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);

  it("app.idle() waits for an in-process request still running, and names one that never answers", async () => {
    const worked: number[] = [];
    const jobs = signal.once<{ n: number }>("runner.jobs");
    const worker = on(jobs, flow("runner.work", { do: ({ n }: { n: number }) => void worked.push(n) }));
    const held = gate();
    const go = on(
      http.post("/go"),
      flow("runner.go", {
        do: async (_: unknown, fx) => {
          await held.promise;
          await fx.emit(jobs, { n: 1 });
        },
      }),
    );
    const hung = on(
      http.post("/hung"),
      flow("runner.hung", { do: () => new Promise<void>(() => undefined) }),
    );
    const app = createApp({ modules: [{ jobs, worker, go, hung }], env: "test", store: createMemoryStore() });
    await app.boot();
    try {
      const answered = app.request("/go", { method: "POST" });
      let idle = false;
      const idled = app.idle().then(() => (idle = true));
      for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
      expect(idle).toBe(false);
      held.open();
      await idled;
      // The request's emit and its worker ran before idle() resolved.
      expect(worked).toEqual([1]);
      expect((await answered).status).toBe(204);

      void app.request("/hung", { method: "POST" });
      const err = await app.idle({ timeoutMs: 200 }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(isOkeError(err) && err.code).toBe("OKE1099");
      expect((err as Error).message).toContain("1 in-process request(s) (app.request)");
    } finally {
      await app.stop({ timeoutMs: 200 });
    }
  });

  it("app.idle() settles under vi.useFakeTimers(): its own waits use the real timers", async () => {
    const worked: number[] = [];
    const jobs = signal.once<{ n: number }>("fake.jobs");
    const worker = on(jobs, flow("fake.work", { do: ({ n }: { n: number }) => void worked.push(n) }));
    const app = createApp({ modules: [{ jobs, worker }], env: "test", store: createMemoryStore() });
    await app.boot();
    vi.useFakeTimers();
    try {
      await app.emit(jobs, { n: 7 });
      await app.idle();
      expect(worked).toEqual([7]);
    } finally {
      vi.useRealTimers();
      await app.stop();
    }
  });
});
