// Send drivers: boot warns about a webhook channel without a url; OKE1270's fix says how to give it one; failures say why.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { channel } from "../channel/channel.ts";
import { isOkeError } from "../errors.ts";
import { createApp, flow, http, on, signal } from "../index.ts";
import { createMemoryStore } from "../store/memory/memory-store.ts";
import { SendDrivers } from "./send.ts";

const capture = () => {
  const lines: Array<{ level: number; msg: string } & Record<string, unknown>> = [];
  const logger = pino({ level: "info" }, { write: (l: string) => void lines.push(JSON.parse(l)) });
  return { logger, warns: () => lines.filter((l) => l.level === 40) };
};

/** prod without a database: the store is passed in, and the config must not ask for PostgreSQL. */
const PROD = { drivers: { journal: "memory" as const } };

const servers: Server[] = [];
afterEach(() => servers.splice(0).forEach((s) => s.close()));

/** A webhook receiver answering `status`, after `delayMs`. */
async function receiver(status: number, delayMs = 0): Promise<{ url: string; bodies: string[] }> {
  const bodies: string[] = [];
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (c: Buffer) => (body += c.toString()));
    req.on("end", () => {
      bodies.push(body);
      setTimeout(() => res.writeHead(status).end("ok"), delayMs);
    });
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, bodies };
}

const reject = async (p: Promise<unknown>): Promise<Error & { code?: string; fix?: string }> => {
  try {
    await p;
  } catch (e) {
    return e as Error;
  }
  throw new Error("did not reject");
};

describe("boot's warning about a webhook channel without a url", () => {
  const welcome = signal.once("welcome.send");
  const email = channel("email", { url: undefined }); // as `url: process.env.EMAIL_WEBHOOK_URL` with it unset
  const worker = on(welcome, flow("workers.welcome", { do: (_, fx) => fx.send(email, { to: "a" }) }));

  it("prod, where drivers.send is webhook: one warning naming the channel and the fix", () => {
    const { logger, warns } = capture();
    createApp({
      modules: [{ welcome, email, worker }],
      env: "prod",
      store: createMemoryStore(),
      logger,
      config: PROD,
    });
    expect(warns()).toHaveLength(1);
    expect(warns()[0]).toMatchObject({ channel: "email", driver: "webhook", code: "OKE1270" });
    expect(warns()[0]!.msg).toBe(
      'okengine: channel "email" sends by webhook (drivers.send, the default in prod) but has no url: every fx.send to it will fail with OKE1270 (in a worker: retried, then a dead letter). Give it a url, e.g. channel("email", { url: process.env.EMAIL_WEBHOOK_URL }) with that variable set, or pin another driver: { driver: "console" }.',
    );
  });

  it("no warning with a url, in dev (console) or in tests (memory)", () => {
    const withUrl = channel("email.url", { url: "https://mail.example/send" });
    const { logger, warns } = capture();
    createApp({ modules: [{ withUrl }], env: "prod", store: createMemoryStore(), logger, config: PROD });
    for (const env of ["dev", "test"] as const)
      createApp({ modules: [{ welcome, email, worker }], env, store: createMemoryStore(), logger });
    expect(warns()).toEqual([]);
  });

  it("a channel pinned to webhook without a url warns in every environment, naming its driver option", () => {
    const pinned = channel("sms.alerts", { driver: "webhook", url: "" });
    const { logger, warns } = capture();
    createApp({ modules: [{ pinned }], env: "dev", store: createMemoryStore(), logger });
    expect(warns()[0]!.msg).toContain('channel "sms.alerts" sends by webhook (its driver option)');
    expect(warns()[0]!.msg).toContain("url: process.env.SMS_ALERTS_WEBHOOK_URL");
  });

  it("and the send itself fails with OKE1270, whose fix is the same", async () => {
    const sends = new SendDrivers("webhook", pino({ level: "silent" }));
    const e = await reject(sends.send(email, { to: "a" }, 0));
    expect(isOkeError(e) && e.code).toBe("OKE1270");
    expect(e.fix).toBe(
      'Give it a url, e.g. channel("email", { url: process.env.EMAIL_WEBHOOK_URL }) with that variable set, or pin another driver: { driver: "console" }.',
    );
  });
});

describe("the webhook driver", () => {
  const send = (url: string, timeoutMs = 2_000) =>
    new SendDrivers("webhook", pino({ level: "silent" })).send(
      channel("email", { url, timeoutMs }),
      { to: "ada@example.com" },
      0,
    );

  it("POSTs { channel, payload } as JSON; a 2xx is a success", async () => {
    const r = await receiver(202);
    await send(r.url);
    expect(r.bodies).toEqual(['{"channel":"email","payload":{"to":"ada@example.com"}}']);
  });

  it("a non-2xx answer is OKE1272", async () => {
    const r = await receiver(503);
    const e = await reject(send(r.url));
    expect([e.code, e.message]).toEqual(["OKE1272", 'Channel "email": webhook answered 503']);
  });

  it("a refused connection is OKE1271 and says why, not only fetch's 'fetch failed'", async () => {
    const r = await receiver(200);
    servers.splice(0).forEach((s) => s.close()); // its port, now closed
    const e = await reject(send(r.url));
    expect(e.code).toBe("OKE1271");
    expect(e.message).toMatch(/^Channel "email": webhook failed: fetch failed \(.*ECONNREFUSED.*\)$/);
  });

  it("an answer slower than timeoutMs is OKE1271 'timed out'", async () => {
    const r = await receiver(200, 1_000);
    const e = await reject(send(r.url, 100));
    expect([e.code, e.message]).toEqual(["OKE1271", 'Channel "email": webhook timed out after 100 ms']);
  });
});

describe("a failed send in an HTTP flow", () => {
  it("answers 500 with the error's code", async () => {
    const hook = channel("hooks.none", { driver: "webhook" });
    const route = on(http.post("/hook"), flow("hook", { do: (_, fx) => fx.send(hook, {}) }));
    const app = createApp({ modules: [{ hook, route }], env: "test", logger: pino({ level: "silent" }) });
    const res = await app.request("/hook", { method: "POST" });
    expect(res.status).toBe(500);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe("OKE1270");
    await app.stop();
  });
});
