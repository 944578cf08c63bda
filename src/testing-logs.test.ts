// createTestApp's logs: warnings and errors are printed by default (a handler failing on every attempt shows up), OKE_LOG_LEVEL=silent prints none.
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { withoutVitestEnv } from "../test/support/built-oke.ts";

const dir = mkdtempSync(join(tmpdir(), "oke-test-logs-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const script = join(dir, "failing-worker.mts");
writeFileSync(
  script,
  `import { flow, on, signal } from ${JSON.stringify(fileURLToPath(new URL("./index.ts", import.meta.url)))};
import { createTestApp } from ${JSON.stringify(fileURLToPath(new URL("./testing.ts", import.meta.url)))};
const mail = signal.once<{ to: string }>("mail.send", { retries: 1 });
const send = on(mail, flow("mail.sender", { do: ({ to }) => { throw new TypeError("cannot read properties of undefined (reading 'host') for " + to); } }));
const app = await createTestApp({ modules: [{ mail, send }] });
await app.emit(mail, { to: "ada@example.com" });
await app.idle();
await app.stop();
`,
);

const run = (level: string | undefined) =>
  spawnSync(process.execPath, ["--import", "tsx", script], {
    // --import resolves tsx from the working directory: this repository's.
    cwd: fileURLToPath(new URL("..", import.meta.url)),
    env: { ...withoutVitestEnv(process.env), OKE_LOG_LEVEL: level, NO_COLOR: "1" },
    encoding: "utf8",
    timeout: 60_000,
  });

describe("createTestApp's logs", () => {
  it("print a handler's failures by default, and nothing with OKE_LOG_LEVEL=silent", () => {
    const shown = run(undefined);
    expect(shown.status, shown.stderr).toBe(0);
    expect(shown.stdout).toContain(
      "cannot read properties of undefined (reading 'host') for ada@example.com",
    );
    expect(shown.stdout).toMatch(/WARN|ERROR/);
    expect(shown.stdout).not.toMatch(/\bINFO\b|\bDEBUG\b/);
    const quiet = run("silent");
    expect(quiet.status, quiet.stderr).toBe(0);
    expect(quiet.stdout).toBe("");
  }, 90_000);
});
