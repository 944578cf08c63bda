// The memory engine: snapshots round-trip every structure, ops replay to the same state.
import { describe, expect, it } from "vitest";
import { cloneJson } from "./clone-json.ts";
import { applyOp, MemoryEngine, type EngineOp } from "./memory-engine.ts";

const m = (id: string, key: string | null = null, signal = "s") => ({
  id,
  signal,
  key,
  payload: { id },
  parentRunId: null,
});

/** Ops touching every structure: keyed and unkeyed, inflight, retried, dead, delivered, runs in each status. */
function script(): EngineOp[] {
  const now = 1_000;
  return [
    {
      op: "enqueue",
      messages: [m("u1"), m("u2"), m("a1", "a"), m("a2", "a"), m("b1", "b"), m("a3", "a")],
      now,
    },
    { op: "claim", req: { signal: "s", worker: "w1", max: 3, now, leaseMs: 100 } },
    { op: "settle", settlements: [{ id: "u1", worker: "w1", attempt: 1, status: "dead" }], now: now + 1 },
    {
      op: "settle",
      settlements: [
        {
          id: "a1",
          worker: "w1",
          attempt: 1,
          status: "pending",
          failure: { code: "E", message: "x", at: now + 1, attempt: 1 },
        },
      ],
      now: now + 1,
    },
    { op: "claim", req: { signal: "s", worker: "w2", max: 1, now: now + 2, leaseMs: 100 } },
    { op: "enqueue", messages: [m("o1", null, "other")], now: now + 3 },
    {
      op: "startRun",
      req: { id: "r1", flow: "f", input: { x: 1 }, parentRunId: null, owner: "i1", now, leaseMs: 500 },
    },
    {
      op: "append",
      req: {
        runId: "r1",
        owner: "i1",
        now,
        entries: [{ runId: "r1", seq: 0, kind: "step", name: "s0", value: [1], at: now }],
        emits: [m("e1", "a")],
      },
    },
    {
      op: "park",
      req: {
        runId: "r1",
        owner: "i1",
        now,
        entry: {
          runId: "r1",
          seq: 1,
          kind: "sleep",
          label: "z",
          duration: "50ms",
          wakeAt: now + 50,
          at: now,
        },
      },
    },
    {
      op: "startRun",
      req: { id: "r2", flow: "f", input: null, parentRunId: "r1", owner: "i1", now, leaseMs: 500 },
    },
    {
      op: "finish",
      req: { runId: "r2", owner: "i1", now, status: "failed", error: { code: "E", message: "no" } },
    },
    {
      op: "startRun",
      req: { id: "r3", flow: "g", input: null, parentRunId: null, owner: "i2", now, leaseMs: 10 },
    },
  ];
}

function run(engine: MemoryEngine, ops: readonly EngineOp[]): unknown[] {
  return ops.map((op) => applyOp(engine, cloneJson(op)));
}

/** Everything observable, at a given instant, without changing state. */
function observe(e: MemoryEngine, now: number): unknown {
  return {
    stats: [e.stats("s", now), e.stats("other", now)],
    dead: e.deadLetters("s"),
    leases: e.nextLeaseExpiry("s"),
    wake: e.nextWakeAt(),
    orphans: e.listOrphans(now),
    runs: e.listRuns({}),
    journal: e.getJournal("r1"),
    messages: ["u1", "u2", "a1", "a2", "a3", "b1", "e1", "o1"].map((id) => e.getMessage(id)),
  };
}

/** Ops after the snapshot point; their results must match on both engines. */
const after: EngineOp[] = [
  { op: "claim", req: { signal: "s", worker: "w3", max: 10, now: 1_200, leaseMs: 100 } },
  { op: "claimDueRuns", req: { owner: "i3", now: 1_200, max: 10, leaseMs: 100 } },
  { op: "replay", signal: "s", ids: "all", now: 1_201 },
  { op: "claim", req: { signal: "s", worker: "w3", max: 10, now: 1_202, leaseMs: 100 } },
];

describe("MemoryEngine snapshot and op log", () => {
  it("a restored snapshot behaves exactly like the original", () => {
    const original = new MemoryEngine();
    run(original, script());
    const snap = JSON.parse(JSON.stringify(original.snapshot())) as ReturnType<MemoryEngine["snapshot"]>;
    const restored = MemoryEngine.restore(snap);
    expect(restored.snapshot()).toEqual(original.snapshot());
    expect(observe(restored, 1_100)).toEqual(observe(original, 1_100));
    expect(run(restored, after)).toEqual(run(original, after));
    expect(restored.snapshot()).toEqual(original.snapshot());
  });

  it("replaying the op log on a fresh engine reproduces the state", () => {
    const original = new MemoryEngine();
    const results = run(original, script());
    const replayed = new MemoryEngine();
    expect(run(replayed, script())).toEqual(results);
    expect(replayed.snapshot()).toEqual(original.snapshot());
  });

  it("a refused op changes nothing", () => {
    const e = new MemoryEngine();
    run(e, script());
    const before = JSON.stringify(e.snapshot());
    expect(() => e.enqueue([m("z1"), m("u2")], 5)).toThrow(/already exists/);
    expect(() =>
      e.append({ runId: "r3", owner: "i2", now: 5, entries: [], emits: [m("z2"), m("z2")] }),
    ).toThrow();
    expect(() => e.acquireRun({ runId: "r2", owner: "i9", now: 5, leaseMs: 1 })).toThrow(/is failed/);
    expect(JSON.stringify(e.snapshot())).toBe(before);
  });

  it("refuses snapshots of an unknown version", () => {
    expect(() =>
      MemoryEngine.restore({ version: 2 } as unknown as ReturnType<MemoryEngine["snapshot"]>),
    ).toThrow(/version 2/);
  });
});

describe("cloneJson", () => {
  it("deep-copies JSON data, keeps a __proto__ key as data, and falls back for other objects", () => {
    const src = JSON.parse('{"a":[1,{"b":2}],"__proto__":{"polluted":true},"n":null}') as Record<
      string,
      unknown
    >;
    const copy = cloneJson(src);
    expect(copy).toEqual(src);
    expect(copy.a).not.toBe(src.a);
    expect(Object.getPrototypeOf(copy)).toBe(Object.prototype);
    expect(Object.keys(copy)).toContain("__proto__");
    const d = new Date(5);
    const withDate = cloneJson({ d });
    expect(withDate.d).toEqual(d);
    expect(withDate.d).not.toBe(d);
  });
});
