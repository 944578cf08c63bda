// createTestApp: the memory journal whatever OKE_JOURNAL says, a refusing stopped app, and app.idle()'s report.
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
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
