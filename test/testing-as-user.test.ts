// okengine/testing as a user meets it: the starter with a schedule added, run by vitest with the okengine plugin from another directory.
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runToEnd } from "./package/proc.ts";

const REPO = join(import.meta.dirname, "..");
const work = mkdtempSync(join(tmpdir(), "oke-testing-user-"));
const app = join(work, "my-app");

/** The starter, okengine resolving to this repository's sources (the tarball has them built). */
function writeStarter(): void {
  cpSync(join(REPO, "templates/starter"), app, { recursive: true });
  const pkg = readFileSync(join(app, "package.json"), "utf8");
  writeFileSync(join(app, "package.json"), pkg.replace("{{name}}", "my-app").replace("{{version}}", "0.0.0"));
  mkdirSync(join(app, "node_modules/okengine"), { recursive: true });
  for (const dep of ["vitest", "zod", "@types"])
    symlinkSync(join(REPO, "node_modules", dep), join(app, "node_modules", dep));
  symlinkSync(join(REPO, "src"), join(app, "node_modules/okengine/src"));
  writeFileSync(
    join(app, "node_modules/okengine/package.json"),
    JSON.stringify({
      name: "okengine",
      type: "module",
      exports: { ".": "./src/index.ts", "./testing": "./src/testing.ts", "./vitest": "./src/vitest.ts" },
    }),
  );
  // A daily digest mail: the starter's own tests move time past its slots and assert app.sent.
  mkdirSync(join(app, "src/flows/digest"));
  writeFileSync(
    join(app, "src/flows/digest/daily.ts"),
    [
      'import { every, flow, on } from "okengine";',
      'import { email } from "@/channels/email";',
      "",
      "export const daily = on(",
      '  every("1d"),',
      "  flow({",
      "    do: async (_slot, fx) => {",
      '      await fx.send(email, { to: "team@example.com", subject: "Daily digest" });',
      "    },",
      "  }),",
      ");",
      "",
    ].join("\n"),
  );
  writeFileSync(
    join(app, "src/flows/digest/daily.test.ts"),
    [
      'import { afterEach, expect, test } from "vitest";',
      'import { createTestApp, type TestApp } from "okengine/testing";',
      'import { email } from "@/channels/email";',
      "",
      "let app: TestApp | undefined;",
      "afterEach(() => app?.stop());",
      "",
      'test("the digest goes out once a day when the test names its schedule", async () => {',
      '  app = await createTestApp({ project: ".", schedules: ["digest.daily"] });',
      '  await app.time.advanceAsync("3d");',
      "  expect(app.sent.of(email).map((m) => m.payload.subject)).toEqual([",
      '    "Daily digest",',
      '    "Daily digest",',
      '    "Daily digest",',
      "  ]);",
      "});",
      "",
    ].join("\n"),
  );
  // A handler that never ends: idle() names it, and the afterEach stop ends before the hook timeout.
  writeFileSync(
    join(app, "src/hung.test.ts"),
    [
      'import { afterEach, expect, test } from "vitest";',
      'import { flow, on, signal } from "okengine";',
      'import { createTestApp, type TestApp } from "okengine/testing";',
      "",
      'const jobs = signal.once("hung.jobs");',
      'const hang = on(jobs, flow("hung.work", { do: () => new Promise<void>(() => undefined) }));',
      "let app: TestApp | undefined;",
      "afterEach(() => app?.stop());",
      "",
      'test("a hung handler is reported by OKE1099", async () => {',
      "  app = await createTestApp({ modules: [{ jobs, hang }] });",
      "  await app.emit(jobs);",
      '  await expect(app.idle()).rejects.toMatchObject({ code: "OKE1099" });',
      "});",
      "",
    ].join("\n"),
  );
}

beforeAll(writeStarter);
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe("createTestApp in a user's project under vitest", () => {
  it("runs from another directory (--root), leaves unnamed schedules out, and a stop after OKE1099 ends before vitest's hook timeout", async () => {
    const report = join(work, "report.json");
    // tsx loads okengine's TypeScript sources where a user's install has them compiled.
    const tsx = pathToFileURL(join(REPO, "node_modules/tsx/dist/loader.mjs")).href;
    const r = await runToEnd(
      process.execPath,
      [
        "--import",
        tsx,
        join(app, "node_modules/vitest/vitest.mjs"),
        "run",
        "--root",
        app,
        "--reporter=json",
        `--outputFile=${report}`,
      ],
      {
        cwd: work,
        env: { ...process.env, VITEST: undefined, VITEST_POOL_ID: undefined, NODE_ENV: undefined },
      },
    );
    const results = JSON.parse(readFileSync(report, "utf8")) as {
      testResults: Array<{
        name: string;
        message: string;
        assertionResults: Array<{ fullName: string; status: string; failureMessages: string[] }>;
      }>;
    };
    const tests = results.testResults.flatMap((f) =>
      f.assertionResults.map((t) => ({ file: f.name.slice(app.length + 1), ...t })),
    );
    const failed = tests.filter((t) => t.status !== "passed");
    expect(
      failed.map((t) => `${t.file} > ${t.fullName}: ${t.failureMessages.join("\n").slice(0, 400)}`),
      r.output.slice(-3000),
    ).toEqual([]);
    expect(results.testResults.filter((f) => f.message !== "").map((f) => f.message)).toEqual([]);
    expect(tests.map((t) => t.file).sort()).toEqual([
      "src/flows/digest/daily.test.ts",
      "src/flows/signup/create.test.ts",
      "src/flows/signup/create.test.ts",
      "src/flows/signup/create.test.ts",
      "src/flows/trials/start.test.ts",
      "src/hung.test.ts",
    ]);
    expect(r.code, r.output.slice(-3000)).toBe(0);
  }, 120_000);
});
