// Storable limits on every driver: payloads and keys at the limits pass, past them a 422 and nothing enqueued.
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { flow, http, on, signal, OkeError } from "../../src/index.ts";
import { MAX_DEPTH, MAX_KEY_BYTES, MAX_PAYLOAD_BYTES } from "../../src/signal/storable.ts";
import { appFactory } from "./app-fixture.ts";
import { drivers } from "./drivers.ts";

// The storable limits are one rule for every driver: what one driver refuses, all refuse (with the same
// code, before anything is written), and what passes is stored and delivered intact by all of them.

/** Request bodies are JSON: they say so, as a real client would. */
const JSON_TYPE = { "content-type": "application/json" };

const nested = (levels: number): unknown => {
  let v: unknown = "leaf";
  for (let i = 0; i < levels; i++) v = i % 2 === 0 ? { a: v } : [v];
  return v;
};

const codeOf = async (p: Promise<unknown>): Promise<string | undefined> => {
  const e = await p.then(
    () => undefined,
    (err: unknown) => err,
  );
  if (e === undefined) return undefined;
  expect(e).toBeInstanceOf(OkeError);
  expect((e as OkeError).status).toBe(422);
  return (e as OkeError).code;
};

describe.each(drivers)("store limits on the $name driver", (driver) => {
  const apps = appFactory(driver);

  it("stores and delivers payloads and keys right at the limits, unchanged", async () => {
    const task = signal.once("limits.edge");
    const seen: unknown[] = [];
    const w = on(task, flow("limits.worker", { do: (p: unknown) => void seen.push(p) }));
    const app = await apps.make([{ task, w }]);
    // 256 × "é" is exactly MAX_KEY_BYTES bytes of UTF-8; PostgreSQL must index it.
    const key = "é".repeat(MAX_KEY_BYTES / 2);
    // Inside the wrapper object below: MAX_DEPTH levels in all.
    const deep = nested(MAX_DEPTH - 1);
    // Emoji (surrogate pairs), control characters other than NUL, and a big string just under the limit.
    const text = "😀 \u0001\u001f \uFFFF";
    const big = { s: "x".repeat(MAX_PAYLOAD_BYTES - 100) };
    await app.emit(task, { deep, text }, { key });
    await app.emit(task, big);
    await app.idle();
    expect(seen).toHaveLength(2);
    expect(seen).toContainEqual({ deep, text });
    expect(seen).toContainEqual(big);
  });

  it("refuses what no driver may hold with a 422 code, and enqueues nothing", async () => {
    const task = signal.once("limits.refused");
    const w = on(task, flow("limits.worker", { do: () => undefined }));
    const app = await apps.make([{ task, w }], { boot: false });
    await app.store.open();
    expect(await codeOf(app.emit(task, nested(MAX_DEPTH + 1)))).toBe("OKE1252");
    expect(await codeOf(app.emit(task, nested(5_000)))).toBe("OKE1252");
    expect(await codeOf(app.emit(task, { s: "x".repeat(MAX_PAYLOAD_BYTES) }))).toBe("OKE1253");
    expect(await codeOf(app.emit(task, {}, { key: "k".repeat(MAX_KEY_BYTES + 1) }))).toBe("OKE1254");
    expect(await codeOf(app.emit(task, {}, { key: "é".repeat(MAX_KEY_BYTES / 2 + 1) }))).toBe("OKE1254");
    expect(await codeOf(app.emit(task, { a: ["ok", "nul\u0000"] }))).toBe("OKE1255");
    expect(await codeOf(app.emit(task, { ["bad\u0000key"]: 1 }))).toBe("OKE1255");
    expect(await codeOf(app.emit(task, {}, { key: "k\u0000" }))).toBe("OKE1255");
    expect(await codeOf(app.emit(task, { s: "lone \uD800 high" }))).toBe("OKE1256");
    expect(await codeOf(app.emit(task, { s: "lone \uDC00 low" }))).toBe("OKE1256");
    expect(await codeOf(app.emit(task, {}, { key: "\uDFFF" }))).toBe("OKE1256");
    const stats = await app.operator.stats("limits.refused");
    expect(stats.pending + stats.inflight + stats.delivered + stats.dead).toBe(0);
  });

  it("names the place of the problem in the message", async () => {
    const task = signal.once("limits.named");
    const w = on(task, flow("limits.worker", { do: () => undefined }));
    const app = await apps.make([{ task, w }], { boot: false });
    const e = (await app
      .emit(task, { users: [{ name: "a" }, { name: "b\u0000" }] })
      .catch((x: unknown) => x)) as OkeError;
    expect(e.message).toBe('"limits.named": string at $.users[1].name contains a NUL character (\\u0000)');
  });

  it("checks fx.emit inside a flow too: the HTTP answer is the 422, nothing is enqueued", async () => {
    const task = signal.once("limits.fromFlow", { schema: z.object({ note: z.string() }) });
    const w = on(task, flow("limits.worker", { do: () => undefined }));
    const producer = on(
      http.post("/notes"),
      flow("notes.create", {
        in: z.object({ note: z.string() }),
        do: async ({ note }, fx) => fx.emit(task, { note: `${note}\u0000` }),
      }),
    );
    const app = await apps.make([{ task, w, producer }]);
    const res = await app.request("/notes", {
      method: "POST",
      headers: JSON_TYPE,
      body: JSON.stringify({ note: "hi" }),
    });
    expect(res.status).toBe(422);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe("OKE1255");
    expect((await app.operator.stats("limits.fromFlow")).pending).toBe(0);
  });

  it("refuses a request body the store could not hold before a durable run is written", async () => {
    const start = on(
      http.post("/runs/start"),
      flow("runs.start", { durable: true, do: (input: unknown) => ({ got: input }) }),
    );
    const app = await apps.make([{ start }]);
    const nul = await app.request("/runs/start", {
      method: "POST",
      headers: JSON_TYPE,
      body: '{"name":"a\\u0000b"}',
    });
    expect(nul.status).toBe(422);
    expect(((await nul.json()) as { error: { code: string } }).error.code).toBe("OKE1255");
    const lone = await app.request("/runs/start", {
      method: "POST",
      headers: JSON_TYPE,
      body: '{"name":"\\ud800"}',
    });
    expect(((await lone.json()) as { error: { code: string } }).error.code).toBe("OKE1256");
    const deep = "[".repeat(5_000) + "]".repeat(5_000);
    const tooDeep = await app.request("/runs/start", { method: "POST", headers: JSON_TYPE, body: deep });
    expect(tooDeep.status).toBe(422);
    expect(((await tooDeep.json()) as { error: { code: string } }).error.code).toBe("OKE1252");
    const query = await app.request("/runs/start?x=%00", { method: "POST" });
    expect(((await query.json()) as { error: { code: string } }).error.code).toBe("OKE1255");
    expect(await app.operator.runs()).toEqual([]);
    // A body right at the depth limit is a run like any other.
    const ok = await app.request("/runs/start", {
      method: "POST",
      headers: JSON_TYPE,
      body: JSON.stringify(nested(MAX_DEPTH - 1)),
    });
    expect(ok.status).toBe(200);
  });
});
