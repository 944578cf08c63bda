// The HTTP layer against the real createApp: what a user's flows see and answer.
import { afterEach, describe, expect, it } from "vitest";
import { pino } from "pino";
import { z } from "zod";
import type { App } from "../index.ts";
import { createApp, flow, http, on, OkeError } from "../index.ts";

// The HTTP layer against the real createApp: what a user's flows see and answer.

interface Envelope {
  ok: boolean;
  data?: unknown;
  reason?: string;
  error?: { code: string; message: string; details?: Array<{ path: string; message: string }> };
}
const read = async (res: Response): Promise<Envelope> => (await res.json()) as Envelope;
const jsonInit = (method: string, body: unknown): RequestInit => ({
  method,
  headers: { "content-type": "application/json" },
  body: JSON.stringify(body),
});

const modules = [
  {
    path: "src/flows/orders/create.ts",
    exports: {
      create: on(
        http.post(),
        flow({
          in: z.object({ userId: z.string(), amount: z.number().positive() }),
          do: ({ userId, amount }) => ({ userId, amount }),
        }),
      ),
    },
  },
  {
    path: "src/flows/users/[id].ts",
    exports: { show: on(http.get(), flow({ do: (input: unknown) => input })) },
  },
  {
    exports: {
      wait: on(
        http.post("/trials/start"),
        flow("trials.start", {
          durable: true,
          do: async (_input: unknown, fx) => {
            await fx.clock.sleep("expiry-window", "3d");
            return { unreachable: true };
          },
        }),
      ),
      paid: on(
        http.get("/paid"),
        flow("orders.paid", {
          do: () => {
            throw new OkeError({ code: "OKE9409", status: 409, message: "Order already paid" });
          },
        }),
      ),
      crash: on(
        http.get("/crash"),
        flow("crash", {
          do: () => {
            throw new Error("connection string postgres://admin:pw@db");
          },
        }),
      ),
    },
  },
];

let app: App | undefined;
afterEach(async () => {
  await app?.stop();
  app = undefined;
});

describe("HTTP through createApp", () => {
  it("answers 200 with the envelope and 422 listing the zod issues", async () => {
    app = createApp({ env: "test", modules });
    const ok = await app.request("/orders", jsonInit("POST", { userId: "u1", amount: 5 }));
    expect(ok.status).toBe(200);
    expect(await read(ok)).toEqual({ ok: true, data: { userId: "u1", amount: 5 } });

    const bad = await app.request("/orders", jsonInit("POST", { userId: 1, amount: -1 }));
    expect(bad.status).toBe(422);
    const body = await read(bad);
    expect(body.error?.code).toBe("OKE1422");
    expect(body.error?.details?.map((i) => i.path).sort()).toEqual(["amount", "userId"]);
  });

  it("merges path parameters and the query into a GET flow's input", async () => {
    app = createApp({ env: "test", modules });
    const res = await app.request("/users/42?expand=orders&expand=trials");
    expect(await read(res)).toEqual({ ok: true, data: { id: "42", expand: ["orders", "trials"] } });
  });

  it("answers 204 with no body when a durable flow parks", async () => {
    app = createApp({ env: "test", modules });
    await app.boot();
    const res = await app.request("/trials/start", jsonInit("POST", {}));
    expect(res.status).toBe(204);
    expect(await res.text()).toBe("");
    expect((await app.operator.sleepers()).map((s) => s.label)).toEqual(["expiry-window"]);
  });

  it("keeps an OkeError's status and hides other errors in prod", async () => {
    app = createApp({
      env: "prod",
      modules,
      config: { drivers: { journal: "memory" } },
      logger: pino({ level: "silent" }),
    });
    const paid = await app.request("/paid");
    expect(paid.status).toBe(409);
    expect((await read(paid)).error).toEqual({ code: "OKE9409", message: "Order already paid" });

    const crash = await app.request("/crash");
    expect(crash.status).toBe(500);
    const text = await crash.text();
    expect(JSON.parse(text)).toEqual({ ok: false, error: { code: "OKE1500", message: "Internal error" } });
    expect(text).not.toContain("postgres://");
  });

  it("in test, an in-process request's 500 carries what the flow threw, so a failing test shows it", async () => {
    app = createApp({ env: "test", modules });
    const crash = await app.request("/crash");
    expect(crash.status).toBe(500);
    const { error } = (await read(crash)) as unknown as {
      error: { code: string; details: { message: string; stack: string } };
    };
    expect(error.code).toBe("OKE1500");
    expect(error.details.message).toMatch(/postgres:\/\//);
    expect(error.details.stack).toMatch(/app-http\.test\.ts/);
  });

  it("reports 503 reason booting until boot, then ready", async () => {
    app = createApp({ env: "test", modules });
    const before = await app.request("/_/ready");
    expect(before.status).toBe(503);
    expect((await read(before)).reason).toBe("booting");
    await app.boot();
    expect(await read(await app.request("/_/ready"))).toEqual({ ok: true, data: { status: "ready" } });
  });

  it("serves the same answers on a real port", async () => {
    app = createApp({ env: "test", modules });
    const { port } = await app.start({ port: 0, host: "127.0.0.1" });
    const base = `http://127.0.0.1:${port}`;
    const res = await fetch(`${base}/orders`, jsonInit("POST", { userId: "u2", amount: 1 }));
    expect(await read(res)).toEqual({ ok: true, data: { userId: "u2", amount: 1 } });
    const wrong = await fetch(`${base}/orders`);
    expect(wrong.status).toBe(405);
    expect(wrong.headers.get("allow")).toBe("POST");
    expect((await fetch(`${base}/_/health`)).status).toBe(200);
  });
});
