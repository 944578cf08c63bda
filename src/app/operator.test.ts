// The operator API's signal lookups: a broadcast's copies per flow, and OKE1081 saying what a name is when it is not a once signal.
import { afterEach, describe, expect, it } from "vitest";
import { createApp, flow, on, signal, type App } from "../index.ts";
import type { OkeError } from "../errors.ts";

const welcome = signal.once<{ to: string }>("welcome.send");
const sender = on(welcome, flow("welcome.sender", { do: () => undefined }));
const changed = signal.broadcast<{ sku: string }>("catalog.changed");
const mark = on(changed, flow("cache.mark", { do: () => undefined }));
const search = on(
  changed,
  flow("cache.search", {
    do: ({ sku }: { sku: string }) => {
      if (sku === "boom") throw new Error("index down");
    },
  }),
);
const ticker = signal.live<{ n: number }>("ticker.moved");

const apps: App[] = [];
afterEach(async () => {
  while (apps.length > 0) await apps.pop()!.stop();
});

const refusal = async (p: Promise<unknown>): Promise<OkeError> => {
  const e = await p.then(
    () => undefined,
    (x: unknown) => x as OkeError,
  );
  if (e === undefined) throw new Error("expected a refusal");
  return e;
};

describe("app.operator", () => {
  it("copies(signal) gives each bound flow's copies of a broadcast signal, failed ones counted", async () => {
    const app = createApp({ modules: [{ welcome, sender, changed, mark, search, ticker }], env: "test" });
    apps.push(app);
    await app.boot();
    await app.emit(changed, { sku: "a1" });
    await app.emit(changed, { sku: "boom" });
    await app.idle();
    const copies = await app.operator.copies("catalog.changed");
    expect(copies.map((c) => c.flow).sort()).toEqual(["cache.mark", "cache.search"]);
    expect(copies.find((c) => c.flow === "cache.mark")).toMatchObject({
      delivered: 2,
      deliveredFailed: 0,
      pending: 0,
    });
    expect(copies.find((c) => c.flow === "cache.search")).toMatchObject({ delivered: 2, deliveredFailed: 1 });
    expect((await refusal(app.operator.copies("welcome.send"))).message).toBe(
      'No broadcast signal named "welcome.send" in this app.',
    );
  });

  it("OKE1081 says what a broadcast or live name is instead, and lists the once signals for a name it does not know", async () => {
    const app = createApp({ modules: [{ welcome, sender, changed, mark, search, ticker }], env: "test" });
    apps.push(app);
    await app.boot();
    const broadcast = await refusal(app.operator.stats("catalog.changed"));
    expect(broadcast).toMatchObject({
      code: "OKE1081",
      message:
        '"catalog.changed" is a broadcast signal: it has no queue of its own (each bound flow gets a copy of each event).',
      fix: 'app.operator.copies("catalog.changed") gives each flow\'s copies: how many ran, and how many failed (deliveredFailed).',
    });
    expect(await refusal(app.operator.deadLetters("ticker.moved"))).toMatchObject({
      code: "OKE1081",
      message: '"ticker.moved" is a live signal: it keeps a tape of entries, not a queue of messages.',
    });
    expect(await refusal(app.operator.stats("welcome.sned"))).toMatchObject({
      code: "OKE1081",
      message: 'No once signal named "welcome.sned" in this app.',
      fix: "Its once signals: welcome.send.",
    });
    expect(await app.operator.stats("welcome.send")).toMatchObject({ signal: "welcome.send", pending: 0 });
  });
});

describe("app.operator.pending", () => {
  it("lists a once signal's messages waiting for a worker, oldest first, with their payloads (workers off: role web)", async () => {
    const app = createApp({ modules: [{ welcome, sender }], env: "test", role: "web" });
    apps.push(app);
    await app.boot();
    await app.emit(welcome, { to: "ada@example.com" }, { id: "m_1" });
    await app.emit(welcome, { to: "bob@example.com" }, { id: "m_2", key: "bob" });
    await app.idle();
    expect(await app.operator.pending("welcome.send")).toEqual([
      {
        id: "m_1",
        payload: { to: "ada@example.com" },
        key: null,
        attempts: 0,
        createdAt: expect.any(Number),
        status: "pending",
      },
      {
        id: "m_2",
        payload: { to: "bob@example.com" },
        key: "bob",
        attempts: 0,
        createdAt: expect.any(Number),
        status: "pending",
      },
    ]);
    expect((await app.operator.pending("welcome.send", 1)).map((m) => m.id)).toEqual(["m_1"]);
    // The handle's shortcut, payloads typed as the signal's.
    const typed = await app.pending(welcome);
    expect(typed.map((m) => m.payload.to)).toEqual(["ada@example.com", "bob@example.com"]);
    await expect(app.operator.pending(welcome as unknown as string)).rejects.toThrow(
      "app.operator takes a signal's name (a string), got object: pass signal.name, or use app.pending(signal) / app.deadLetters(signal), which take the handle",
    );
    expect((await refusal(app.operator.pending("welcome.sned"))).code).toBe("OKE1081");
    await expect(app.operator.pending("welcome.send", 0)).rejects.toThrow(
      "operator.pending: limit must be a positive integer, got 0",
    );
  });
});
