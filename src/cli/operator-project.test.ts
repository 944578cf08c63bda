// oke run in one project while the Console that answers is another project's app: said on stderr, unless --url was typed.
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { withoutVitestEnv } from "../../test/support/built-oke.ts";

const TOKEN = "alice-secret-0123456789";
const BIN = fileURLToPath(new URL("../../bin/oke.js", import.meta.url));

describe("oke in another project than the app answering", () => {
  let server: Server;
  let url: string;
  let appRoot = "";
  const seen: string[] = [];
  const dirs: string[] = [];
  const project = (): string => {
    const dir = mkdtempSync(join(tmpdir(), "oke-project-"));
    dirs.push(dir);
    writeFileSync(join(dir, "package.json"), '{ "type": "module" }');
    mkdirSync(join(dir, "src", "flows"), { recursive: true });
    return dir;
  };

  beforeAll(async () => {
    server = createServer((req, res) => {
      seen.push(req.url ?? "");
      res.writeHead(200, { "content-type": "application/json" });
      res.end(
        JSON.stringify(
          req.url === "/api/whoami"
            ? { label: "alice", open: false, env: "dev", root: appRoot }
            : { jobs: [] },
        ),
      );
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  const run = (cwd: string, args: string[]) =>
    new Promise<{ code: number | null; stderr: string }>((resolve) => {
      const child = spawn(process.execPath, [BIN, ...args], {
        cwd,
        env: { ...withoutVitestEnv(process.env), OKE_CONSOLE_URL: url, OKE_CONSOLE_TOKEN: TOKEN },
        stdio: ["ignore", "pipe", "pipe"],
      });
      let stderr = "";
      child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
      child.on("close", (code) => resolve({ code, stderr }));
    });

  it("warns when the app's root is another project, not when it is this one or --url was typed", async () => {
    const other = project();
    const here = project();
    appRoot = other;
    const warned = await run(here, ["replays"]);
    expect(warned.code).toBe(0);
    expect(warned.stderr).toBe(
      `oke: warning: the Console at ${url} belongs to the app of ${other}, not of this project (${here}); ` +
        "this project's app may not be running, or its Console is on another port (console.port): pass --url to choose\n",
    );
    appRoot = here;
    expect(await run(here, ["replays"])).toEqual({ code: 0, stderr: "" });
    appRoot = other;
    seen.length = 0;
    expect(await run(here, ["replays", "--url", url])).toEqual({ code: 0, stderr: "" });
    expect(seen).toEqual(["/api/replays"]);
  }, 90_000);
});
