// releaseClaimed on postgres: another instance hears of the released message (NOTIFY) and claims it at once.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { recordEvents } from "../conformance/harness.ts";
import type { Store } from "../types.ts";
import { dropSchema, freshSchema, openStore } from "./test-support.ts";

const T0 = 1_700_000_000_000;

describe("postgres releaseClaimed across instances", () => {
  const schema = freshSchema("release");
  let a: Store;
  let b: Store;
  beforeAll(async () => {
    // Poll far away: the event below can only come from LISTEN.
    a = await openStore(schema, { pollIntervalMs: 3_600_000 });
    b = await openStore(schema, { pollIntervalMs: 3_600_000 });
  });
  afterAll(async () => {
    await a.close();
    await b.close();
    await dropSchema(schema);
  });

  it("a release on one instance wakes another's subscribers, which claim the message as the same attempt", async () => {
    await a.enqueue([{ id: "m1", signal: "sig.rel", key: "k", payload: null, parentRunId: null }], T0);
    const [c] = await a.claim({ signal: "sig.rel", worker: "a", max: 10, now: T0, leaseMs: 30_000 });
    const rec = recordEvents(b);
    expect(await a.releaseClaimed([{ id: c!.id, worker: "a", attempt: c!.attempts }], T0 + 1)).toEqual([
      "m1",
    ]);
    await rec.next((e) => e.kind === "settled" && e.signal === "sig.rel");
    rec.stop();
    expect(
      await b.claim({ signal: "sig.rel", worker: "b", max: 10, now: T0 + 2, leaseMs: 30_000 }),
    ).toMatchObject([{ id: "m1", attempts: 1, lockedBy: "b" }]);
  });
});
