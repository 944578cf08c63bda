// http.drainDelayMs: on stop, /_/ready answers 503 while the app still serves, then the port closes.
import { afterEach, describe, expect, it } from "vitest";
import { until } from "../../test/conformance/app-fixture.ts";
import { createApp, flow, http, on, signal } from "../index.ts";
import { createMemoryStore } from "../store/memory/memory-store.ts";
import type { App } from "./types.ts";

const task = signal.once("tasks.note");

/** An app with one route and one once worker; `handled` lists what the worker got. */
function build(drainDelayMs?: number) {
  const handled: string[] = [];
  const route = on(http.post("/notes"), flow("notes.add", { do: (input: { text: string }) => input }));
  const worker = on(
    task,
    flow("workers.note", {
      do: (input: unknown) => {
        handled.push((input as { text: string }).text);
      },
    }),
  );
  const app = createApp({
    env: "test",
    modules: [{ task, route, worker }],
    store: createMemoryStore(),
    ...(drainDelayMs === undefined ? {} : { config: { http: { drainDelayMs } } }),
  });
  return { app, handled };
}

const post = (base: string, text: string) =>
  fetch(`${base}/notes`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ text }),
  });

describe("stop with http.drainDelayMs", () => {
  let app: App | undefined;
  afterEach(async () => {
    await app?.stop({ drainMs: 0, timeoutMs: 2_000 });
    app = undefined;
  });

  it("answers 503 on /_/ready and keeps serving until the drain ends, then closes the port", async () => {
    const built = build(60_000);
    app = built.app;
    const { port } = await app.start({ port: 0, host: "127.0.0.1" });
    const base = `http://127.0.0.1:${port}`;
    expect((await fetch(`${base}/_/ready`)).status).toBe(200);

    const stopped = app.stop();
    const ready = await fetch(`${base}/_/ready`);
    expect(ready.status).toBe(503);
    expect(((await ready.json()) as { reason: string }).reason).toBe("stopping");
    // Everything else goes on: routes answer, emits are taken and handled.
    const res = await post(base, "during the drain");
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ ok: true, data: { text: "during the drain" } });
    await app.emit(task, { text: "emitted while draining" });
    await until(() => built.handled.includes("emitted while draining"), "the worker to handle the emit");
    expect((await fetch(`${base}/_/health`)).status).toBe(200);

    // A stop({ drainMs: 0 }) ends the drain now; both calls resolve once the app has stopped.
    await app.stop({ drainMs: 0 });
    await stopped;
    await expect(post(base, "after")).rejects.toThrow();
    await expect(app.emit(task, { text: "late" })).rejects.toMatchObject({ code: "OKE1089" });
  });

  it("without a drain the port closes at once, and a second stop() waits for the first", async () => {
    const built = build();
    app = built.app;
    const { port } = await app.start({ port: 0, host: "127.0.0.1" });
    const first = app.stop();
    const second = app.stop();
    await second;
    // The second call resolved only once the app had stopped, not while it was stopping.
    await expect(app.emit(task, { text: "late" })).rejects.toThrow("the app is stopped");
    await first;
    await expect(fetch(`http://127.0.0.1:${port}/_/ready`)).rejects.toThrow();
  });

  it("an app that is not listening does not drain", async () => {
    const built = build(60_000);
    app = built.app;
    await app.boot();
    await app.stop();
    await expect(app.emit(task, { text: "late" })).rejects.toThrow("the app is stopped");
  });

  it.each([-1, 1.5, Number.NaN])("refuses http.drainDelayMs %s, naming it", (bad) => {
    expect(() => build(bad)).toThrow(`http.drainDelayMs must be a non-negative integer, got ${bad}`);
  });
});
