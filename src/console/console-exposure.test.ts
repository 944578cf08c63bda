// Who may reach the Console: loopback names for an open one (DNS rebinding), cross-site refusals, and misconfigured settings leaving it off.
import { request } from "node:http";
import type { IncomingMessage } from "node:http";
import { afterEach, describe, expect, it } from "vitest";
import { createApp } from "../app/app.ts";
import { createTimeTravel } from "../clock/time-travel.ts";
import { flow, on, signal } from "../index.ts";
import { createMemoryStore } from "../store/memory/memory-store.ts";
import { recordingLogger, until } from "../../test/conformance/app-fixture.ts";
import { checkSameSite, hostName } from "./auth.ts";
import { decideConsole, isLoopbackAddress, isLoopbackName } from "./config.ts";

const jobs = signal.once<{ n: number }>("exposure.jobs", { retries: 0 });
const worker = on(
  jobs,
  flow("exposure.work", {
    do: ({ n }: { n: number }) => {
      throw new Error(`job ${n} broke`);
    },
  }),
);

const TOKEN = "alice-secret-0123456789";

interface Answer {
  status: number;
  body: string;
  headers: Record<string, string | string[] | undefined>;
}

/** One request with the headers given as they are (fetch would not let a test set Host). */
function raw(
  url: string,
  path: string,
  opts: { method?: string; headers?: Record<string, string>; body?: string; noHost?: boolean } = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const options = { method: opts.method ?? "GET", headers: opts.headers, setHost: opts.noHost !== true };
    const r = request(`${url}${path}`, options, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () =>
        resolve({
          status: res.statusCode ?? 0,
          body: Buffer.concat(chunks).toString("utf8"),
          headers: res.headers,
        }),
      );
    });
    r.on("error", reject);
    r.end(opts.body);
  });
}

const codeOf = (a: Answer): unknown => (JSON.parse(a.body) as { error?: { code?: string } }).error?.code;

describe("loopback names", () => {
  it("takes localhost, names under it, 127.0.0.0/8 literals and ::1; nothing that only looks like them", () => {
    for (const name of [
      "localhost",
      "LOCALHOST",
      "localhost.",
      "app.localhost",
      "a.b.localhost.",
      "127.0.0.1",
      "127.1.2.3",
      "127.255.255.255",
      "::1",
    ])
      expect([name, isLoopbackName(name)]).toEqual([name, true]);
    for (const name of [
      "127.attacker.example",
      "127.0.0.1.nip.io",
      "127.0.0.1.",
      "localhost.attacker.example",
      "attacker-localhost",
      ".localhost",
      "127.0.0",
      "127.0.0.1.2",
      "127.0.0.256",
      "0177.0.0.1",
      "127.00.0.1",
      "127.1",
      "0x7f.0.0.1",
      "128.0.0.1",
      "10.0.0.1",
      "0.0.0.0",
      "::",
      "::ffff:10.0.0.1",
      "",
      "evil.example",
    ])
      expect([name, isLoopbackName(name)]).toEqual([name, false]);
  });

  it("binds open only to loopback addresses (not to names under localhost, which DNS may answer)", () => {
    for (const host of ["127.0.0.1", "127.0.0.2", "::1", "localhost"])
      expect([host, isLoopbackAddress(host)]).toEqual([host, true]);
    for (const host of ["127.evil.example", "127.0.0.1.nip.io", "0.0.0.0", "::", "app.localhost"])
      expect([host, isLoopbackAddress(host)]).toEqual([host, false]);
    expect(decideConsole({ console: { port: 0, host: "127.evil.example" } }, "dev", {})).toMatchObject({
      run: false,
      reason: "refused",
    });
    expect(decideConsole({ console: { port: 0, host: "127.0.0.2" } }, "dev", {})).toMatchObject({
      run: true,
      open: true,
    });
  });

  it("reads the name out of a Host header, or nothing from a malformed one", () => {
    expect(hostName("127.0.0.1:6533")).toBe("127.0.0.1");
    expect(hostName("localhost")).toBe("localhost");
    expect(hostName("[::1]:6533")).toBe("::1");
    expect(hostName("[::1]")).toBe("::1");
    expect(hostName("[::1]evil.example")).toBeUndefined();
    expect(hostName("localhost:6533:1")).toBeUndefined();
    expect(hostName("localhost:")).toBeUndefined();
    expect(hostName("")).toBeUndefined();
    expect(hostName(undefined)).toBeUndefined();
  });

  it("refuses a mutation whose Origin is not loopback on an open Console, even when Origin matches Host", () => {
    const req = (host: string, origin: string) =>
      ({
        headers: { host, origin, "x-oke-console": "1", "sec-fetch-site": "same-origin" },
      }) as unknown as IncomingMessage;
    const attack = req("127.attacker.example:6601", "http://127.attacker.example:6601");
    expect(() => checkSameSite(attack, true)).toThrow(expect.objectContaining({ code: "OKE1603" }));
    expect(() => checkSameSite(req("127.0.0.1.nip.io:6601", "http://127.0.0.1.nip.io:6601"), true)).toThrow(
      expect.objectContaining({ code: "OKE1603" }),
    );
    // Same origin on a loopback name: allowed. Behind a token, the name is the proxy's and may be anything.
    expect(() => checkSameSite(req("localhost:6601", "http://localhost:6601"), true)).not.toThrow();
    expect(() => checkSameSite(req("[::1]:6601", "http://[::1]:6601"), true)).not.toThrow();
    expect(() => checkSameSite(req("ops.example.com", "https://ops.example.com"), false)).not.toThrow();
    expect(() => checkSameSite(req("localhost:6601", "http://localhost:6602"), true)).toThrow(
      expect.objectContaining({ code: "OKE1603" }),
    );
  });
});

describe("an open Console on loopback", () => {
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    while (cleanups.length > 0) await cleanups.pop()!();
  });

  async function start(tokens?: Record<string, string>) {
    const store = createMemoryStore();
    const app = createApp({
      modules: [{ worker }],
      env: "test",
      clock: createTimeTravel(1_700_000_000_000),
      store,
      config: { console: { port: 0, ...(tokens ? { tokens } : {}) } },
    });
    cleanups.push(async () => {
      await app.stop({ timeoutMs: 2_000 });
      await store.close();
    });
    const { console: c } = await app.start({ port: 0, host: "127.0.0.1" });
    expect(c).toBeDefined();
    return { app, url: c!.url, port: c!.port };
  }

  it("refuses the audit's rebinding requests: Host 127.attacker.example and 127.0.0.1.nip.io, GET and a POST discard", async () => {
    const { app, url, port } = await start();
    await app.emit(jobs, { n: 1 });
    await app.idle();
    for (const host of [`127.attacker.example:${port}`, `127.0.0.1.nip.io:${port}`, "evil.example"]) {
      const overview = await raw(url, "/api/overview", { headers: { host } });
      expect([host, overview.status, codeOf(overview)]).toEqual([host, 403, "OKE1607"]);
      // The page, sign-in and any other path too: nothing answers a foreign name but the refusal.
      for (const [method, path] of [
        ["GET", "/"],
        ["GET", "/favicon.ico"],
        ["POST", "/api/login"],
        ["GET", "/api/nowhere"],
      ] as const) {
        const r = await raw(url, path, {
          method,
          headers: { host, "x-oke-console": "1", "content-type": "application/json" },
          body: method === "POST" ? "{}" : undefined,
        });
        expect([host, path, r.status]).toEqual([host, path, 403]);
      }
    }
    const discard = await raw(url, "/api/signals/exposure.jobs/discard", {
      method: "POST",
      headers: {
        host: `127.attacker.example:${port}`,
        origin: `http://127.attacker.example:${port}`,
        "sec-fetch-site": "same-origin",
        "x-oke-console": "1",
        "content-type": "application/json",
      },
      body: JSON.stringify({ all: true }),
    });
    expect(discard.status).toBe(403);
    expect((await app.operator.signals()).find((s) => s.signal === "exposure.jobs")?.dead).toBe(1);
    const missingHost = await raw(url, "/api/overview", { noHost: true });
    expect(missingHost.status).toBe(400); // Node's own answer to HTTP/1.1 without a Host
  });

  it("answers loopback names: localhost, a name under it, any 127.x.y.z, [::1]", async () => {
    const { url, port } = await start();
    for (const host of [
      `localhost:${port}`,
      `app.localhost:${port}`,
      `127.0.0.1:${port}`,
      `127.9.8.7:${port}`,
      `[::1]:${port}`,
    ]) {
      const r = await raw(url, "/api/signals", { headers: { host } });
      expect([host, r.status]).toEqual([host, 200]);
    }
    const discard = await raw(url, "/api/signals/exposure.jobs/discard", {
      method: "POST",
      headers: {
        host: `localhost:${port}`,
        origin: `http://localhost:${port}`,
        "sec-fetch-site": "same-origin",
        "x-oke-console": "1",
        "content-type": "application/json",
      },
      body: JSON.stringify({ all: true, dryRun: true }),
    });
    expect(discard.status).toBe(200);
  });

  it("answers /favicon.ico with an empty 204, so a browser logs no 404", async () => {
    const { url } = await start();
    const icon = await raw(url, "/favicon.ico");
    expect(icon.status).toBe(204);
    expect(icon.body).toBe("");
    expect(icon.headers["cache-control"]).toContain("max-age");
  });

  it("behind a token answers any Host name (a proxy's), the token being what protects it", async () => {
    const { url } = await start({ alice: TOKEN });
    const r = await raw(url, "/api/signals", {
      headers: { host: "ops.example.com", authorization: `Bearer ${TOKEN}` },
    });
    expect(r.status).toBe(200);
    expect((await raw(url, "/api/signals", { headers: { host: "ops.example.com" } })).status).toBe(401);
  });
});

describe("a misconfigured Console stays off and the app runs on", () => {
  it("the docs' example with its variable unset: not started, the warning names the token and the fix", async () => {
    const { logger, records } = recordingLogger();
    const store = createMemoryStore();
    const app = createApp({
      modules: [{ worker }],
      env: "test",
      clock: createTimeTravel(1_700_000_000_000),
      store,
      logger,
      config: { console: { port: 0, tokens: { alice: process.env.OKE_TEST_UNSET_ALICE_TOKEN ?? "" } } },
    });
    try {
      const started = await app.start({ port: 0, host: "127.0.0.1" });
      expect(started.console).toBeUndefined();
      await until(() => records.some((r) => String(r.msg).startsWith("okengine console:")), "the warning");
      const warning = records.find((r) => String(r.msg).startsWith("okengine console:"))!;
      expect(warning.level).toBe(40); // warn
      expect(warning.msg).toBe(
        'okengine console: not started — console token "alice" is empty (is the variable it is read from set?). Set each token to a secret of 16+ characters (e.g. `openssl rand -hex 16`) and restart, or remove it; console.port: false turns the Console off. The app runs on without a Console.',
      );
      // The app itself serves.
      await app.emit(jobs, { n: 1 });
      await app.idle();
      expect((await app.operator.signals()).find((s) => s.signal === "exposure.jobs")?.dead).toBe(1);
    } finally {
      await app.stop({ timeoutMs: 2_000 });
      await store.close();
    }
  });

  it("names each problem: a short or non-string token, a short OKE_CONSOLE_TOKEN, a port that is not one", () => {
    const dev = (c: object, vars: NodeJS.ProcessEnv = {}) =>
      decideConsole({ console: { port: 0, ...c } }, "dev", vars);
    expect(dev({ tokens: { alice: "short-secret" } })).toEqual({
      run: false,
      reason: "refused",
      message: expect.stringContaining('console token "alice" is 12 characters, under 16'),
    });
    expect(dev({ tokens: { bob: 1_234_567_890 as unknown as string } })).toMatchObject({
      run: false,
      message: expect.stringContaining('console token "bob" is a number, not a string'),
    });
    // A good token beside a bad one: still off, rather than half the operators locked out unawares.
    expect(dev({ tokens: { alice: TOKEN, carol: "" } })).toMatchObject({
      run: false,
      message: expect.stringContaining('console token "carol" is empty'),
    });
    expect(dev({}, { OKE_CONSOLE_TOKEN: "abc" })).toMatchObject({
      run: false,
      message: expect.stringContaining("OKE_CONSOLE_TOKEN is 3 characters, under 16"),
    });
    expect(
      decideConsole({ console: {} }, "prod", { OKE_CONSOLE_PORT: "abc", OKE_CONSOLE_TOKEN: TOKEN }),
    ).toEqual({
      run: false,
      reason: "refused",
      message:
        'okengine console: not started — OKE_CONSOLE_PORT is "abc", not a port number (0–65535). Set it to a port, or to false (OKE_CONSOLE_PORT=off) to turn the Console off. The app runs on without a Console.',
    });
    expect(dev({ port: 70_000 })).toMatchObject({
      run: false,
      message: expect.stringContaining("console.port is 70000, not a port number"),
    });
    // A token an Authorization header cannot carry: spaces around it (HTTP strips them) or characters
    // outside visible ASCII (Node refuses to send them). The page took them; oke never could.
    expect(dev({ tokens: { pad: "  padded-token-0123456789  " } })).toMatchObject({
      run: false,
      message: expect.stringContaining(`console token "pad" has a character a header cannot carry`),
    });
    expect(dev({}, { OKE_CONSOLE_TOKEN: "ключ-секрет-0123456789" })).toMatchObject({
      run: false,
      message: expect.stringContaining("OKE_CONSOLE_TOKEN has a character a header cannot carry"),
    });
    // How many proxies to trust: a whole number, from config or OKE_CONSOLE_TRUST_PROXY.
    expect(dev({ tokens: { alice: TOKEN }, trustProxy: -1 })).toMatchObject({
      run: false,
      message: expect.stringContaining("console.trustProxy is -1, not a number of proxies (0–10)"),
    });
    expect(dev({ tokens: { alice: TOKEN } }, { OKE_CONSOLE_TRUST_PROXY: "yes" })).toMatchObject({
      run: false,
      message: expect.stringContaining('OKE_CONSOLE_TRUST_PROXY is "yes", not a number of proxies'),
    });
    expect(dev({ tokens: { alice: TOKEN } }, { OKE_CONSOLE_TRUST_PROXY: "1" })).toMatchObject({
      run: true,
      config: { trustProxy: 1 },
    });
    // In production, a token that is set but short is named, not reported as missing.
    expect(decideConsole({ console: { tokens: { alice: "x" } } }, "prod", {})).toMatchObject({
      run: false,
      message: expect.stringContaining('console token "alice" is 1 character, under 16'),
    });
    // Set properly, or turned off: no complaint.
    expect(dev({ tokens: { alice: TOKEN } })).toMatchObject({ run: true, open: false });
    expect(dev({}, { OKE_CONSOLE_TOKEN: "" })).toMatchObject({ run: true, open: true });
    expect(decideConsole({ console: { port: false, tokens: { alice: "" } } }, "prod", {})).toEqual({
      run: false,
      reason: "off",
    });
  });
});
