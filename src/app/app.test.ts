// createApp end to end: adopting modules, schemas of any Standard Schema library, emits, invoke, durable runs.
import { describe, expect, it } from "vitest";
import { z } from "zod";
import * as v from "valibot";
import { type } from "arktype";
import { channel, clock, createApp, every, flow, http, on, signal, OkeError } from "../index.ts";
import { createTestApp } from "../testing.ts";
import { resolveConfig } from "./config.ts";
import pino from "pino";
import { createMemoryStore } from "../store/memory/memory-store.ts";

const json = async (res: Response): Promise<unknown> => await res.json();

describe("createApp: adopting modules", () => {
  it("names flows <unit>.<export> and derives routes from the file tree", async () => {
    const start = on(
      http.post(),
      flow({ in: z.object({ email: z.string().email() }), do: ({ email }) => ({ email }) }),
    );
    const app = await createTestApp({ modules: [{ path: "src/flows/trials/start.ts", exports: { start } }] });
    expect(app.manifest.routes).toEqual([{ method: "POST", path: "/trials/start", flow: "trials.start" }]);
    const res = await app.request("/trials/start", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ email: "a@b.co" }),
    });
    expect(res.status).toBe(200);
    expect(await json(res)).toEqual({ ok: true, data: { email: "a@b.co" } });
    await app.stop();
  });

  it("fails OKE1071 when two different flows bind one once signal", () => {
    const placed = signal.once("orders.placed");
    const a = on(placed, flow("orders.fulfillA", { do: () => undefined }));
    const b = on(placed, flow("orders.fulfillB", { do: () => undefined }));
    expect(() => createApp({ env: "test", modules: [{ a, b }] })).toThrow(
      'Once signal "orders.placed" is bound to more than one Flow (orders.fulfillA, orders.fulfillB).',
    );
    try {
      createApp({ env: "test", modules: [{ a, b }] });
    } catch (e) {
      expect((e as OkeError).code).toBe("OKE1071");
      expect((e as OkeError).fix).toBe(
        "Use signal.broadcast if each flow should independently receive this event, or bind only one flow if these should compete for the same work.",
      );
    }
  });

  it("accepts one binding re-exported from two modules (replicas are one on())", () => {
    const placed = signal.once("orders.placed");
    const w = on(placed, flow("orders.fulfill", { do: () => undefined }));
    const app = createApp({ env: "test", modules: [{ w }, { again: w }] });
    expect(app.manifest.signals[0]!.flows).toEqual(["orders.fulfill"]);
  });

  it("fails OKE1072 for an unnamed signal flow", () => {
    const task = signal.once("tasks.email");
    const w = on(task, flow({ do: () => undefined }));
    expect(() =>
      createApp({ env: "test", modules: [{ path: "src/flows/workers/email.ts", exports: { w } }] }),
    ).toThrow('A signal flow on "tasks.email" has no name (exported as src/flows/workers/email.ts#w).');
  });

  it("fails on duplicate routes, naming both flows", () => {
    const a = on(http.get("/x"), flow("a", { do: () => 1 }));
    const b = on(http.get("/x"), flow("b", { do: () => 2 }));
    expect(() => createApp({ env: "test", modules: [{ a, b }] })).toThrow(
      'Duplicate route GET /x: bound by flows "a" and "b".',
    );
  });

  it("fails on unknown driver names and postgres without a URL, with the documented texts", () => {
    expect(() =>
      createApp({ env: "test", modules: [], config: { drivers: { journal: "redis" as never } } }),
    ).toThrow('oke boot: unknown journal driver "redis" (expected memory · file · postgres)');
    // The environment is passed in, so the test never reads or edits a developer's DATABASE_URL.
    expect(() => resolveConfig(undefined, "prod", {})).toThrow(
      'oke boot: journal driver "postgres" needs DATABASE_URL',
    );
  });

  it("a store handed to createApp needs no DATABASE_URL in prod: the journal setting picks no store then", async () => {
    expect(() => resolveConfig(undefined, "prod", {}, { storeGiven: true })).not.toThrow();
    // CI sets no DATABASE_URL (only DATABASE_URL_TEST), so this boots prod without one.
    const app = createApp({
      env: "prod",
      modules: [],
      store: createMemoryStore(),
      logger: pino({ level: "silent" }),
    });
    await app.boot();
    expect((await app.request("/_/ready")).status).toBe(200);
    await app.stop();
  });

  it("durable.maxRecoveries: 10 by default, any whole number from 0, nothing else", () => {
    expect(resolveConfig(undefined, "test", {}).durableMaxRecoveries).toBe(10);
    expect(resolveConfig({ durable: { maxRecoveries: 0 } }, "test", {}).durableMaxRecoveries).toBe(0);
    expect(() => resolveConfig({ durable: { maxRecoveries: -1 } }, "test", {})).toThrow(
      "oke boot: durable.maxRecoveries must be a non-negative integer, got -1",
    );
    expect(() => resolveConfig({ durable: { maxRecoveries: 1.5 } }, "test", {})).toThrow(
      /non-negative integer/,
    );
  });

  it("builds a Manifest with flows, routes, signals, channels and effects", () => {
    const task = signal.once("tasks.email", { retries: 5 });
    const mail = channel("email.raw");
    const w = on(task, flow("workers.email", { effects: { sends: ["email.raw"] }, do: () => undefined }));
    const list = on(http.get(), flow({ effects: { reads: ["signal:tasks.email"] }, do: () => [] }));
    const app = createApp({
      env: "test",
      modules: [
        { task, mail, w },
        { path: "src/flows/ops/email-dlq.ts", exports: { list } },
      ],
    });
    expect(app.manifest).toEqual({
      flows: [
        {
          name: "ops.list",
          durable: false,
          source: "src/flows/ops/email-dlq.ts#list",
          triggers: ["GET /ops/email-dlq"],
          effects: { reads: ["signal:tasks.email"], emits: [], sends: [], calls: [] },
        },
        {
          name: "workers.email",
          durable: false,
          triggers: ["signal:tasks.email"],
          effects: { reads: [], emits: [], sends: ["email.raw"], calls: [] },
        },
      ],
      routes: [{ method: "GET", path: "/ops/email-dlq", flow: "ops.list" }],
      signals: [
        {
          name: "tasks.email",
          delivery: "once",
          retries: 5,
          deadLetter: true,
          optional: false,
          description: "tasks.email",
          hasSchema: false,
          flows: ["workers.email"],
        },
      ],
      clocks: [],
      channels: [{ name: "email.raw", description: "email.raw" }],
    });
  });

  it("lists clocks as clocks: schedule, timezone, overlap and the flow each fires", () => {
    const report = on(
      clock("reports.weekly", { cron: "@weekly", timezone: "America/New_York", overlap: false }),
      flow("reports.weekly", { do: () => undefined }),
    );
    const purge = on(every("30m"), flow("links.purge", { do: () => undefined }));
    const app = createApp({ env: "test", modules: [{ report, purge }] });
    expect(app.manifest.clocks).toEqual([
      {
        name: "links.purge",
        flow: "links.purge",
        cron: null,
        every: "30m",
        timezone: "UTC",
        overlap: true,
        overridable: false,
        retries: 3,
        deadLetter: true,
        signal: "clock:links.purge",
      },
      {
        name: "reports.weekly",
        flow: "reports.weekly",
        cron: "@weekly",
        every: null,
        timezone: "America/New_York",
        overlap: false,
        overridable: false,
        retries: 3,
        deadLetter: true,
        signal: "clock:reports.weekly",
      },
    ]);
    expect(app.manifest.flows.map((f) => [f.name, f.triggers])).toEqual([
      ["links.purge", ["clock:links.purge"]],
      ["reports.weekly", ["clock:reports.weekly"]],
    ]);
  });
});

describe("schemas: any Standard Schema library", () => {
  for (const [lib, schema] of [
    ["zod", z.object({ n: z.number() })],
    ["valibot", v.object({ n: v.number() })],
    ["arktype", type({ n: "number" })],
  ] as const) {
    it(`checks ${lib} input and answers 422 listing the issues`, async () => {
      const f = on(http.post("/n"), flow({ in: schema, do: (input: { n: number }) => input.n * 2 }));
      const app = await createTestApp({ modules: [{ f }] });
      const ok = await app.request("/n", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: '{"n":21}',
      });
      expect(await json(ok)).toEqual({ ok: true, data: 42 });
      const bad = await app.request("/n", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: '{"n":"x"}',
      });
      expect(bad.status).toBe(422);
      const body = (await json(bad)) as {
        ok: boolean;
        error: { code: string; details: Array<{ path: string }> };
      };
      expect(body.ok).toBe(false);
      expect(body.error.code).toBe("OKE1422");
      expect(body.error.details[0]!.path).toBe("n");
      await app.stop();
    });
  }
});

describe("fx", () => {
  it("fx.call checks the callee's in and returns its value", async () => {
    const double = flow("math.double", { in: z.object({ n: z.number() }), do: ({ n }) => n * 2 });
    const caller = on(http.get("/call"), flow("caller", { do: async (_, fx) => fx.call(double, { n: 4 }) }));
    const bad = on(
      http.get("/bad"),
      flow("bad", { do: async (_, fx) => fx.call(double, { n: "x" } as never) }),
    );
    const app = await createTestApp({ modules: [{ double, caller, bad }] });
    expect(await json(await app.request("/call"))).toEqual({ ok: true, data: 8 });
    const res = await app.request("/bad");
    expect(((await json(res)) as { error: { code: string } }).error.code).toBe("OKE1422");
    await app.stop();
  });

  it("fx.using disposes resources when the attempt ends, even when it throws", async () => {
    const log: string[] = [];
    const res = (name: string) => ({ close: () => void log.push(`close ${name}`) });
    const ok = on(
      http.get("/ok"),
      flow("ok", {
        do: (_, fx) => {
          fx.using(res("a"));
          fx.using(res("b"));
          log.push("body");
        },
      }),
    );
    const boom = on(
      http.get("/boom"),
      flow("boom", {
        do: (_, fx) => {
          fx.using(res("c"));
          throw new Error("x");
        },
      }),
    );
    const app = await createTestApp({ modules: [{ ok, boom }] });
    expect((await app.request("/ok")).status).toBe(204);
    expect((await app.request("/boom")).status).toBe(500);
    expect(log).toEqual(["body", "close b", "close a", "close c"]);
    await app.stop();
  });

  it("fx.send checks the channel schema and the memory driver captures", async () => {
    const mail = channel("email.raw", { schema: z.object({ to: z.string().email() }) });
    const good = on(
      http.post("/good"),
      flow("good", { do: async (_, fx) => fx.send(mail, { to: "a@b.co" }) }),
    );
    const bad = on(http.post("/bad"), flow("bad", { do: async (_, fx) => fx.send(mail, { to: "nope" }) }));
    const app = await createTestApp({ modules: [{ mail, good, bad }], start: 1000 });
    expect((await app.request("/good", { method: "POST" })).status).toBe(204);
    expect(app.sent).toEqual([{ channel: "email.raw", payload: { to: "a@b.co" }, at: 1000 }]);
    const res = await app.request("/bad", { method: "POST" });
    expect(((await json(res)) as { error: { code: string } }).error.code).toBe("OKE1265");
    expect(app.sent).toHaveLength(1);
    await app.stop();
  });

  it("fx.id is unique and fx.clock.now reads the app clock", async () => {
    const f = on(
      http.get("/t"),
      flow("t", { do: (_, fx) => ({ a: fx.id(), b: fx.id(), now: fx.clock.now() }) }),
    );
    const app = await createTestApp({ modules: [{ f }], start: 5_000 });
    const { data } = (await json(await app.request("/t"))) as { data: { a: string; b: string; now: number } };
    expect(data.a).not.toBe(data.b);
    expect(data.now).toBe(5_000);
    await app.stop();
  });

  it("an undeclared read throws OKE1001 with the documented cause", async () => {
    const task = signal.once("tasks.email");
    const w = on(task, flow("workers.email", { do: () => undefined }));
    const peek = on(http.get("/dlq"), flow("ops.peek", { do: async (_, fx) => fx.deadLetters(task) }));
    const app = await createTestApp({ modules: [{ w, peek }] });
    const body = (await json(await app.request("/dlq"))) as { error: { code: string; message: string } };
    expect(body.error).toMatchObject({
      code: "OKE1001",
      message: 'Flow "ops.peek" reads "signal:tasks.email" without declaring it.',
    });
    await app.stop();
  });

  it("non-durable fx.clock.sleep resolves at once without a timer", async () => {
    const f = on(
      http.get("/s"),
      flow("s", {
        do: async (_, fx) => {
          await fx.clock.sleep("wait", "7d");
          return fx.clock.now();
        },
      }),
    );
    const app = await createTestApp({ modules: [{ f }], start: 10 });
    expect(await json(await app.request("/s"))).toEqual({ ok: true, data: 10 });
    await app.stop();
  });
});

describe("signal declarations", () => {
  it("rejects retention on signal.once with the documented TypeError", () => {
    expect(() => signal.once("x", { retention: "1h" } as never)).toThrow(
      new TypeError('signal.once("x"): retention is only valid with signal.live'),
    );
  });
  it("rejects a string deadLetter and negative retries", () => {
    expect(() => signal.once("x", { deadLetter: "dlq" as never })).toThrow(/deadLetter must be a boolean/);
    expect(() => signal.once("x", { retries: -1 })).toThrow(/retries must be a non-negative integer/);
  });
  it("has the documented defaults", () => {
    const s = signal.once("x");
    expect([s.retries, s.deadLetter, s.optional, s.description]).toEqual([3, true, false, "x"]);
    expect(Object.isFrozen(s)).toBe(true);
  });
});

describe("competing (once) vs fan-out (broadcast)", () => {
  it("broadcast hands every bound flow its own copy, where once would refuse the second flow", async () => {
    const seen: string[] = [];
    const placed = signal.broadcast("orders.placed.fanout");
    const charge = on(
      placed,
      flow("orders.charge", { do: ({ id }: { id: string }) => void seen.push(`charge ${id}`) }),
    );
    const ship = on(
      placed,
      flow("orders.ship", { do: ({ id }: { id: string }) => void seen.push(`ship ${id}`) }),
    );
    const app = await createTestApp({ modules: [{ charge, ship }] });
    await app.emit(placed, { id: "ord_99" });
    await app.idle();
    expect(seen.sort()).toEqual(["charge ord_99", "ship ord_99"]);
    await app.stop();

    const once = signal.once("orders.placed.once");
    expect(() =>
      createApp({
        env: "test",
        modules: [
          {
            a: on(once, flow("orders.charge", { do: () => undefined })),
            b: on(once, flow("orders.ship", { do: () => undefined })),
          },
        ],
      }),
    ).toThrow(/OKE1071|bound to more than one Flow/);
  });
});

describe("live signals", () => {
  it("accept retention but refuse worker flows at boot", () => {
    const feed = signal.live("feed.updates", { retention: "1h" });
    expect(feed.retention).toBe("1h");
    // @ts-expect-error -- on() refuses a live signal at compile time too (JavaScript callers get OKE1078)
    const w = on(feed, flow("feed.worker", { do: () => undefined }));
    expect(() => createApp({ env: "test", modules: [{ w }] })).toThrow(
      'Live signal "feed.updates" cannot have worker flows (feed.worker).',
    );
  });
});
