// TakeoverLog: one info line per run taken over from a lapsed lease, summed up past 20 a window so a mass takeover does not flood the log.
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { recordingLogger } from "../../test/conformance/app-fixture.ts";
import { TAKEOVER_LINES, TAKEOVER_WINDOW_MS, TakeoverLog } from "./recoveries.ts";

beforeEach(() => {
  vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "performance"] });
});
afterEach(() => {
  vi.useRealTimers();
});

const run = (n: number) => ({ id: `r${n}`, flow: "f", recoveries: 1 });

describe("TakeoverLog", () => {
  it("one line per run: id, flow, previous holder, count and bound", () => {
    const { logger, records } = recordingLogger();
    new TakeoverLog(logger, 10).note(run(1), "host:1:abc/7");
    expect(records).toEqual([
      expect.objectContaining({
        level: 30,
        runId: "r1",
        flow: "f",
        previousHolder: "host:1:abc/7",
        recoveries: 1,
        maxRecoveries: 10,
        msg: 'durable run "r1" (f) taken over from host:1:abc/7, whose lease lapsed: recovery 1 of at most 10 (durable.maxRecoveries)',
      }),
    ]);
  });

  it("10 000 takeovers: 20 lines, then one line per window with the count and the first ids until a window passes without", () => {
    const { logger, records } = recordingLogger();
    const log = new TakeoverLog(logger, 10);
    // 10 000 runs over 5 windows (a dead instance's runs, taken as permits free).
    for (let n = 0; n < 10_000; n++) {
      log.note(run(n), `dead/${n % 3}`);
      vi.advanceTimersByTime((5 * TAKEOVER_WINDOW_MS) / 10_000);
    }
    log.flush();
    const lines = records.filter((r) => r.level === 30);
    expect(lines.filter((r) => r.runId !== undefined)).toHaveLength(TAKEOVER_LINES);
    const summaries = lines.filter((r) => r.count !== undefined);
    expect(summaries.length).toBeLessThanOrEqual(6);
    expect(summaries.reduce((a, r) => a + (r.count as number), 0)).toBe(10_000 - TAKEOVER_LINES);
    expect(summaries[0]).toMatchObject({
      runIds: Array.from({ length: TAKEOVER_LINES }, (_, i) => `r${TAKEOVER_LINES + i}`),
      previousHolders: ["dead/2", "dead/0", "dead/1"],
      maxRecoveries: 10,
    });
    // Quiet for a whole window: the next takeover gets its own line again.
    vi.advanceTimersByTime(2 * TAKEOVER_WINDOW_MS);
    log.note(run(99_999), "dead/9");
    expect(records.at(-1)).toMatchObject({ runId: "r99999", previousHolder: "dead/9" });
  });

  it("the summary is written at the window's end without further takeovers, and by flush (a stop)", () => {
    const { logger, records } = recordingLogger();
    const log = new TakeoverLog(logger, undefined);
    for (let n = 0; n < TAKEOVER_LINES + 2; n++) log.note(run(n), "dead/1");
    expect(records).toHaveLength(TAKEOVER_LINES);
    expect(records[0]).not.toHaveProperty("maxRecoveries");
    vi.advanceTimersByTime(TAKEOVER_WINDOW_MS);
    expect(records.at(-1)).toMatchObject({ count: 2, runIds: ["r20", "r21"], previousHolders: ["dead/1"] });
    log.note(run(100), "dead/1");
    log.flush();
    expect(records.at(-1)).toMatchObject({ count: 1, runIds: ["r100"] });
  });
});
