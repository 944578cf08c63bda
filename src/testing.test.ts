// createTestApp: the memory journal, a refusing stopped app, idle()'s report, advanceAsync, schedules, app.sent.of, request bodies.
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, expectTypeOf, it } from "vitest";
import { z } from "zod";
import { channel } from "./channel/channel.ts";
import { clock, every } from "./clock/schedule.ts";
import { flow } from "./flow/flow.ts";
import { http } from "./flow/http-trigger.ts";
import { on } from "./flow/on.ts";
import { signal } from "./signal/signal.ts";
import { createTestApp } from "./testing.ts";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
const tempDir = (): string => {
  const d = mkdtempSync(join(tmpdir(), "oke-testing-test-"));
  dirs.push(d);
  return d;
};

/** Runs `fn` with OKE_JOURNAL set, restoring it after (test files in a worker run one at a time). */
async function withJournalEnv<T>(value: string, fn: () => Promise<T>): Promise<T> {
  const before = process.env.OKE_JOURNAL;
  process.env.OKE_JOURNAL = value;
  try {
    return await fn();
  } finally {
    if (before === undefined) delete process.env.OKE_JOURNAL;
    else process.env.OKE_JOURNAL = before;
  }
}

const HOUR = 3_600_000;
const ping = signal.once("testing.ping", { optional: true });
const pong = on(ping, flow("testing.pong", { do: () => undefined }));

describe("createTestApp journal", () => {
  it("uses the memory journal even with OKE_JOURNAL=file: nothing lands in the project's .oke/", async () => {
    const root = tempDir();
    const app = await withJournalEnv("file", () => createTestApp({ modules: [{ pong }], root }));
    try {
      await app.emit(ping);
      await app.idle();
    } finally {
      await app.stop();
    }
    expect(existsSync(join(root, ".oke"))).toBe(false);
  });

  it("a config that pins the file journal gets its own temporary directory: two apps do not share a lock", async () => {
    const config = { drivers: { journal: "file" as const } };
    const a = await createTestApp({ modules: [{ pong }], config });
    const b = await createTestApp({ modules: [{ pong }], config });
    try {
      await a.emit(ping);
      await b.emit(ping);
      await Promise.all([a.idle(), b.idle()]);
    } finally {
      await Promise.all([a.stop(), b.stop()]);
    }
  });
});

describe("a stopped test app", () => {
  it("refuses app.emit and app.request with OKE1089 instead of answering", async () => {
    const hello = on(http.get("/hello"), flow("testing.hello", { do: () => ({ ok: true }) }));
    const app = await createTestApp({ modules: [{ pong, hello }] });
    expect((await app.request("/hello")).status).toBe(200);
    await app.stop();
    await expect(app.emit(ping)).rejects.toMatchObject({
      code: "OKE1089",
      message: expect.stringContaining("app.emit(): the app is stopped") as unknown,
    });
    await expect(app.request("/hello")).rejects.toMatchObject({ code: "OKE1089" });
  });
});

describe("app.idle()", () => {
  it("names the handler still running, and its default wait fits vitest's 5 s test timeout", async () => {
    let release = (): void => undefined;
    const gate = new Promise<void>((r) => (release = r));
    const stuck = signal.once("testing.stuck");
    const hang = on(stuck, flow("testing.hang", { do: () => gate }));
    const app = await createTestApp({ modules: [{ hang }] });
    try {
      await app.emit(stuck);
      const err = await app.idle().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toMatchObject({ code: "OKE1099" });
      expect((err as Error).message).toMatch(
        /^app\.idle\(\): work still running after 4000 ms: message \S+ of "testing\.stuck" \(flow "testing\.hang"\)$/,
      );
    } finally {
      release();
      await app.stop();
    }
  }, 15_000);
});

describe("createTestApp start", () => {
  it("starts the frozen clock at epoch ms or at a Date", async () => {
    const at = new Date("2026-05-01T10:00:00Z");
    for (const start of [at, at.getTime()]) {
      const app = await createTestApp({ modules: [], start });
      try {
        expect(app.time.now()).toBe(at.getTime());
      } finally {
        await app.stop();
      }
    }
  });
});

describe("app.time.advanceAsync", () => {
  it("runs each of three 1 h sleeps at its own hour, where one advance('3h') runs only the first", async () => {
    const start = signal.once("testing.naps");
    const woke: Record<string, number[]> = {};
    const naps = on(
      start,
      flow("testing.napper", {
        durable: true,
        do: async ({ who }: { who: string }, fx) => {
          for (const n of [1, 2, 3]) {
            await fx.clock.sleep(`nap-${n}`, "1h");
            await fx.step(`woke-${n}`, () => (woke[who] ??= []).push(fx.clock.now()));
          }
        },
      }),
    );
    const app = await createTestApp({ modules: [{ naps }] });
    try {
      await app.emit(start, { who: "async" });
      await app.idle();
      expect(await app.time.advanceAsync("3h")).toBe(3 * HOUR);
      expect(woke.async).toEqual([HOUR, 2 * HOUR, 3 * HOUR]);

      await app.emit(start, { who: "jump" });
      await app.idle();
      app.time.advance("3h");
      await app.idle();
      expect(woke.jump).toEqual([6 * HOUR]); // the jump: due at 4 h, it ran at 6 h; the next sleeps wait
    } finally {
      await app.stop();
    }
  });

  it("lets a handler mid-await finish before time passes its lease: it runs once, not again as a next attempt", async () => {
    const jobs = signal.once("testing.slow");
    const attempts: number[] = [];
    let release = (): void => undefined;
    const slow = on(
      jobs,
      flow("testing.slow-work", {
        do: async () => {
          attempts.push(attempts.length + 1);
          // A mocked HTTP call: it answers when the test lets it, whatever the app clock says.
          if (attempts.length === 1) await new Promise<void>((r) => (release = r));
        },
      }),
    );
    const app = await createTestApp({ modules: [{ slow }] });
    try {
      await app.emit(jobs);
      const moved = app.time.advanceAsync("1m"); // past the 30 s lease
      setImmediate(() => release());
      await moved;
      expect(attempts).toEqual([1]);
    } finally {
      await app.stop();
    }
  });

  it("fires each slot of a schedule at its time, where a jump fires one catch-up", async () => {
    const fired: Array<{ slot: number; at: number }> = [];
    const tick = on(
      every("1h"),
      flow("testing.hourly", {
        do: ({ scheduledAt }, fx) => void fired.push({ slot: scheduledAt, at: fx.clock.now() }),
      }),
    );
    const app = await createTestApp({ modules: [{ tick }] });
    try {
      await app.time.advanceAsync("3h");
      expect(fired).toEqual([
        { slot: HOUR, at: HOUR },
        { slot: 2 * HOUR, at: 2 * HOUR },
        { slot: 3 * HOUR, at: 3 * HOUR },
      ]);
      app.time.advance("3h");
      await app.idle();
      expect(fired.slice(3)).toEqual([{ slot: 6 * HOUR, at: 6 * HOUR }]);
    } finally {
      await app.stop();
    }
  });

  it("gives up on a flow that sleeps 1 ms in a loop with OKE1088 naming the run, and is stoppable", async () => {
    const go = signal.once("testing.spin");
    const spin = on(
      go,
      flow("testing.spinner", {
        durable: true,
        do: async (_: unknown, fx) => {
          for (let i = 0; ; i++) await fx.clock.sleep(`tick-${i}`, "1ms");
        },
      }),
    );
    const app = await createTestApp({ modules: [{ spin }] });
    try {
      await app.emit(go);
      const err = await app.time.advanceAsync("1h", { maxSteps: 20 }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toMatchObject({ code: "OKE1088" });
      expect((err as Error).message).toMatch(
        /^time\.advanceAsync\("1h"\): gave up after 20 deadlines, 20 ms into the 3600000 ms asked for \(now 1970-01-01T00:00:00\.020Z\); they keep coming: run \S+ \(flow "testing\.spinner"\) sleeps \("tick-20"\) until 1970-01-01T00:00:00\.021Z$/,
      );
      expect((err as { fix: string }).fix).toContain("{ maxSteps, timeoutMs }");

      const abort = new AbortController();
      abort.abort(new Error("enough"));
      await expect(app.time.advanceAsync("1h", { signal: abort.signal })).rejects.toThrow("enough");
      await expect(app.time.advanceAsync("1 hour" as "1h")).rejects.toThrow(
        'time.advanceAsync("1 hour"): expected milliseconds or a duration',
      );
    } finally {
      await app.stop();
    }
    await expect(app.time.advanceAsync("1h")).rejects.toMatchObject({ code: "OKE1089" });
  });
});

describe("createTestApp schedules", () => {
  const fired: string[] = [];
  const a = on(every("1h"), flow("testing.sched-a", { do: () => void fired.push("a") }));
  const b = on(
    clock("testing.sched-b", { every: "1h" }),
    flow("testing.sched-b-flow", { do: () => void fired.push("b") }),
  );

  it("fires the ones named, pauses the rest (which can still be triggered), and refuses an unknown name", async () => {
    fired.length = 0;
    const app = await createTestApp({ modules: [{ a, b }], schedules: ["testing.sched-b"] });
    try {
      await app.time.advanceAsync("2h");
      expect(fired).toEqual(["b", "b"]);
      expect((await app.operator.schedules.get("testing.sched-a")).paused).toBe(true);
      await app.operator.schedules.trigger("testing.sched-a");
      await app.idle();
      expect(fired).toEqual(["b", "b", "a"]);
    } finally {
      await app.stop();
    }
    const none = await createTestApp({ modules: [{ a, b }], schedules: false });
    try {
      await none.time.advanceAsync("2h");
      expect(fired).toHaveLength(3);
    } finally {
      await none.stop();
    }
    await expect(createTestApp({ modules: [{ a, b }], schedules: ["nope"] })).rejects.toThrow(
      'createTestApp({ schedules }): "nope" is not a schedule of this app (its schedules: "testing.sched-a", "testing.sched-b")',
    );
  });

  it("with workers off (role web) in an app that declares schedules: boots, and none fires", async () => {
    fired.length = 0;
    const web = await createTestApp({ modules: [{ a, b }], role: "web", schedules: [] });
    try {
      expect(web.role).toBe("web");
      await web.time.advanceAsync("2h");
      expect(fired).toEqual([]);
    } finally {
      await web.stop();
    }
    await expect(createTestApp({ modules: [{ a, b }], role: "web", schedules: ["nope"] })).rejects.toThrow(
      '"nope" is not a schedule of this app',
    );
  });
});

describe("app.sent.of", () => {
  it("filters by channel and types the payload as the channel's", async () => {
    const mail = channel("testing.mail", { schema: z.object({ to: z.string() }) });
    const sms = channel("testing.sms");
    const jobs = signal.once("testing.notify", { optional: true });
    const notify = on(
      jobs,
      flow("testing.notifier", {
        do: async (_: unknown, fx) => {
          await fx.send(mail, { to: "ada@example.com" });
          await fx.send(sms, "hi");
        },
      }),
    );
    const app = await createTestApp({ modules: [{ notify }] });
    try {
      await app.emit(jobs);
      await app.idle();
      const mails = app.sent.of(mail);
      expectTypeOf(mails[0]!.payload).toEqualTypeOf<{ to: string }>();
      expect(mails.map((m) => m.payload.to)).toEqual(["ada@example.com"]);
      expect(app.sent.of("testing.sms").map((m) => m.payload)).toEqual(["hi"]);
      // The helper is no message: the log still compares as the messages alone.
      expect(app.sent).toEqual([
        expect.objectContaining({ channel: "testing.mail" }),
        expect.objectContaining({ channel: "testing.sms" }),
      ]);
    } finally {
      await app.stop();
    }
  });
});

describe("app.request bodies", () => {
  it("answers each kind of body as the server answers the same body sent by fetch", async () => {
    const echo = on(http.post("/echo"), flow("testing.echo", { do: (input: unknown) => ({ input }) }));
    const app = await createTestApp({ modules: [{ echo }] });
    try {
      const { port, host } = await app.start({ port: 0 });
      const bodies: Array<[string, () => RequestInit["body"]]> = [
        ["a JSON string", () => JSON.stringify({ n: 1 })],
        ["FormData", () => formData()],
        ["URLSearchParams", () => new URLSearchParams({ n: "1" })],
        ["bytes", () => new TextEncoder().encode(JSON.stringify({ n: 1 }))],
        ["a Blob", () => new Blob([JSON.stringify({ n: 1 })])],
      ];
      for (const [what, body] of bodies) {
        const answer = async (res: Response) => {
          const b = (await res.json()) as { data?: unknown; error?: { code: string } };
          return { what, status: res.status, data: b.data, code: b.error?.code };
        };
        const real = await fetch(`http://${host}:${port}/echo`, { method: "POST", body: body() });
        const local = await app.request("/echo", { method: "POST", body: body() });
        expect(await answer(local)).toEqual(await answer(real));
      }
      // With the header a browser's JSON request carries, a string is JSON.
      const json = await app.request("/echo", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ n: 1 }),
      });
      expect(await json.json()).toEqual({ ok: true, data: { input: { n: 1 } } });
    } finally {
      await app.stop();
    }
  });
});

function formData(): FormData {
  const f = new FormData();
  f.set("n", "1");
  return f;
}
