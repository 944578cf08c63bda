// The bind address of oke start and oke dev as real processes: loopback by default, HOST in containers.
import { spawn, type ChildProcess } from "node:child_process";
import { networkInterfaces } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";

// The boot line prints the address the server actually bound, and the default bind is loopback.

const REPO = fileURLToPath(new URL("../../", import.meta.url));
const BIN = join(REPO, "bin/oke.js");
const BASIC = fileURLToPath(new URL("./fixtures/basic", import.meta.url));

const running: ChildProcess[] = [];
afterEach(() => {
  for (const c of running.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
});

function lanAddress(): string {
  for (const list of Object.values(networkInterfaces()))
    for (const a of list ?? []) if (a.family === "IPv4" && !a.internal) return a.address;
  throw new Error("bind.test: this machine has no non-loopback IPv4 address to test from");
}

/** Starts `oke <args>` and resolves with its output lines once `until` matched one. */
function boot(args: string[], env: Record<string, string>, until: RegExp): Promise<string[]> {
  const base = { ...process.env };
  delete base.DATABASE_URL;
  delete base.NODE_ENV;
  delete base.HOST;
  const child = spawn(process.execPath, [BIN, ...args], {
    cwd: REPO,
    env: { ...base, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  running.push(child);
  const lines: string[] = [];
  return new Promise((resolve, reject) => {
    for (const stream of [child.stdout, child.stderr]) {
      createInterface({ input: stream }).on("line", (l) => {
        lines.push(l);
        if (until.test(l)) resolve(lines);
      });
    }
    child.once("close", () => reject(new Error(`oke exited before ${String(until)}:\n${lines.join("\n")}`)));
  });
}

const LISTENING = /^okengine listening on http:\/\/(.+):(\d+) \((\w+)\)$/;
const parse = (lines: string[]) => {
  const m = LISTENING.exec(lines.find((l) => LISTENING.test(l))!)!;
  return { host: m[1]!, port: Number(m[2]), env: m[3]! };
};

describe("oke start / oke dev bind address", () => {
  it("oke start without HOST binds loopback, prints it and says how to open it up", async () => {
    const lines = await boot(["start", BASIC, "--port", "0"], { NODE_ENV: "production" }, /loopback only/);
    const { host, port, env } = parse(lines);
    expect({ host, env }).toEqual({ host: "127.0.0.1", env: "prod" });
    expect(lines).toContain(
      "okengine: loopback only; set HOST=0.0.0.0 to accept connections from other machines",
    );
    expect((await fetch(`http://127.0.0.1:${port}/_/health`)).status).toBe(200);
    await expect(fetch(`http://${lanAddress()}:${port}/_/health`)).rejects.toThrow();
  });

  it("oke start with HOST=0.0.0.0 (the container case) binds every interface and prints 0.0.0.0", async () => {
    const lines = await boot(
      ["start", BASIC, "--port", "0"],
      { NODE_ENV: "production", HOST: "0.0.0.0" },
      LISTENING,
    );
    const { host, port } = parse(lines);
    expect(host).toBe("0.0.0.0");
    expect((await fetch(`http://${lanAddress()}:${port}/_/health`)).status).toBe(200);
  });

  it("oke dev binds loopback even when the shell exports HOST", async () => {
    const lines = await boot(["dev", BASIC, "--port", "0"], { HOST: "0.0.0.0" }, LISTENING);
    const { host, env } = parse(lines);
    expect({ host, env }).toEqual({ host: "127.0.0.1", env: "dev" });
  });
});
