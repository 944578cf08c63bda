// fx.call failures and refused run inputs on every driver: a refused call is journaled as failed so a parent that catches it replays the same path after a restart; a durable run's input past the limits is refused before any row is written.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { createTimeTravel, flow, http, on, signal } from "../../src/index.ts";
import { MAX_PAYLOAD_BYTES } from "../../src/signal/storable.ts";
import { createFileStore } from "../../src/store/file/file-store.ts";
import { createMemoryStore } from "../../src/store/memory/memory-store.ts";
import { createPostgresStore } from "../../src/store/postgres/postgres-store.ts";
import type { Store } from "../../src/store/types.ts";
import { appFactory, until } from "./app-fixture.ts";
import { TEST_DATABASE_URL } from "./drivers.ts";

const T0 = 1_000_000;
const HOUR = 3_600_000;

/** A driver whose store can be closed and opened again on the same data: a process restart. */
interface Reopenable {
  name: "memory" | "file" | "postgres";
  make(): { open: () => Store; cleanup: () => Promise<void> };
}

let seq = 0;
const reopenables: Reopenable[] = [
  {
    name: "memory",
    make: () => {
      // Memory lives as long as its object: the "restarted" app gets the same one.
      const store = createMemoryStore();
      return { open: () => store, cleanup: () => store.close() };
    },
  },
  {
    name: "file",
    make: () => {
      const dir = mkdtempSync(join(tmpdir(), "first2-calls-"));
      const opened: Store[] = [];
      return {
        open: () => {
          const s = createFileStore({ dir });
          opened.push(s);
          return s;
        },
        cleanup: async () => {
          for (const s of opened) await s.close();
          rmSync(dir, { recursive: true, force: true });
        },
      };
    },
  },
  {
    name: "postgres",
    make: () => {
      const schema = `first2_calls_${process.pid}_${Date.now().toString(36)}_${seq++}`;
      const opened: Store[] = [];
      return {
        open: () => {
          const s = createPostgresStore({ connectionString: TEST_DATABASE_URL, schema });
          opened.push(s);
          return s;
        },
        cleanup: async () => {
          for (const s of opened) await s.close();
          const c = new pg.Client({ connectionString: TEST_DATABASE_URL });
          await c.connect();
          try {
            await c.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
          } finally {
            await c.end();
          }
        },
      };
    },
  },
];

const codeOf = (e: unknown): string => String((e as { code?: unknown }).code);
const nested = (levels: number): unknown => {
  let v: unknown = "leaf";
  for (let i = 0; i < levels; i++) v = { a: v };
  return v;
};

describe.each(reopenables)("fx.call failures and run inputs on the $name driver", (driver) => {
  const apps = appFactory({
    name: driver.name,
    make: async () => {
      const d = driver.make();
      return { store: d.open(), cleanup: d.cleanup };
    },
  });
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    while (cleanups.length > 0) await cleanups.pop()!();
  });

  it("a parent that catches a refused call result and a refused call input carries on, and replays the same path after a restart", async () => {
    const counts = { child: 0, durableChild: 0, after: 0, end: 0 };
    const child = flow("align.child", {
      do: () => {
        counts.child++;
        return { s: "nul\u0000" };
      },
    });
    const durableChild = flow("align.durableChild", {
      durable: true,
      do: async (input: { s: string }, fx) => fx.step("work", () => ++counts.durableChild + input.s.length),
    });
    const parent = on(
      http.post("/align"),
      flow("align.parent", {
        durable: true,
        do: async (_: unknown, fx) => {
          const notes: string[] = [];
          try {
            await fx.call(child, {});
            notes.push("child returned");
          } catch (e) {
            notes.push(codeOf(e));
          }
          try {
            await fx.call(durableChild, { s: "a\u0000b" });
            notes.push("durable child returned");
          } catch (e) {
            notes.push(codeOf(e));
          }
          await fx.step("after", () => (++counts.after, notes.join(",")));
          await fx.clock.sleep("nap", "1h");
          return fx.step("end", () => (++counts.end, notes));
        },
      }),
    );
    const d = driver.make();
    cleanups.push(d.cleanup);
    const store1 = d.open();
    const app1 = await apps.make([{ parent }], { store: store1, time: createTimeTravel(T0) });
    const res = await app1.request("/align", { method: "POST" });
    expect(res.status).toBe(204);
    const [run] = await app1.operator.runs();
    expect(run).toMatchObject({ flow: "align.parent", status: "sleeping" });
    const first = (await app1.operator.run(run!.id))!.journal;
    const shape = (j: typeof first) =>
      j.map((e) => [e.kind, "name" in e ? e.name : e.label, e.error?.code ?? null, e.value ?? null]);
    expect(shape(first)).toEqual([
      ["call", "align.child", "OKE1255", null],
      ["call", "align.durableChild", "OKE1255", null],
      ["step", "after", null, "OKE1255,OKE1255"],
      ["sleep", "nap", null, null],
    ]);
    expect(first[0]!.error!.message).toMatch(
      new RegExp(`^call "align\\.child" of run "${run!.id}": string at \\$\\.s contains a NUL`),
    );
    expect(first[1]!.error!.message).toMatch(
      /^the input of flow "align\.durableChild" \(fx\.call from "align\.parent"\): string at \$\.s contains a NUL/,
    );
    // The refused input wrote nothing: no child run.
    expect((await app1.operator.runs()).map((r) => r.flow)).toEqual(["align.parent"]);

    // A restart: the first instance is gone, a second one opens the same data an hour later and wakes the run.
    await app1.stop({ timeoutMs: 2_000 });
    if (driver.name !== "memory") await store1.close();
    const app2 = await apps.make([{ parent }], { store: d.open(), time: createTimeTravel(T0 + 2 * HOUR) });
    await until(async () => (await app2.operator.run(run!.id))?.run.status === "completed", "run completes");
    const done = (await app2.operator.run(run!.id))!;
    expect(done.run.output).toEqual(["OKE1255", "OKE1255"]);
    expect(shape(done.journal)).toEqual([...shape(first), ["step", "end", null, ["OKE1255", "OKE1255"]]]);
    // The replay took the journaled failures: the child did not run again, the "after" step was not redone.
    expect(counts).toEqual({ child: 1, durableChild: 0, after: 1, end: 1 });
    expect((await app2.operator.runs()).map((r) => r.flow)).toEqual(["align.parent"]);
  });

  it("a durable once consumer with attempts left journals a caught call failure once the body goes on; its retry replays it and takes the same path", async () => {
    const task = signal.once("align.task", { retries: 2 });
    const counts = { child: 0, after: 0, flaky: 0 };
    const child = flow("align.flakyChild", {
      do: () => {
        counts.child++;
        // Refused on the first attempt (a NUL), fine on the retry.
        return counts.child === 1 ? { s: "nul\u0000" } : { s: "ok" };
      },
    });
    const w = on(
      task,
      flow("align.consumer", {
        durable: true,
        do: async (_: unknown, fx) => {
          let got: string;
          try {
            got = (await fx.call(child, {})).s;
          } catch (e) {
            got = codeOf(e);
          }
          await fx.step("after", () => (++counts.after, got));
          await fx.step("flaky", () => {
            if (++counts.flaky === 1) throw new Error("down once");
          });
          return got;
        },
      }),
    );
    const app = await apps.make([{ w }]);
    await app.emit(task, {});
    await app.idle();
    const [run] = await app.operator.runs();
    const done = (await app.operator.run(run!.id))!;
    // The body caught the refused call and went on to "after", so the call's failure was journaled
    // with it (the path taken depends on it); the failed "flaky" ended the attempt unjournaled. The
    // retry replayed the call's failure (the child did not run again) and "after", and ran "flaky".
    expect(done.run).toMatchObject({ status: "completed", output: "OKE1255" });
    expect(done.journal.map((e) => [e.seq, e.kind, "name" in e ? e.name : e.label])).toEqual([
      [0, "call", "align.flakyChild"],
      [1, "step", "after"],
      [2, "step", "flaky"],
    ]);
    expect(done.journal[0]!.error).toMatchObject({ code: "OKE1255" });
    expect(done.journal[1]!.value).toBe("OKE1255");
    expect(counts).toEqual({ child: 1, after: 1, flaky: 2 });
    expect(await app.operator.stats("align.task")).toMatchObject({ delivered: 1, dead: 0 });
  });

  it("app.invoke of a durable flow refuses an input past the limits with a 422 naming the flow; nothing is written", async () => {
    const target = flow("inp.target", { durable: true, do: async (i: unknown, fx) => fx.step("s", () => i) });
    const plain = flow("inp.plain", { do: (i: { s: string }) => i.s.length });
    const app = await apps.make([{ target, plain }]);
    const refusal = async (input: unknown) => {
      try {
        await app.invoke(target, input);
      } catch (e) {
        return e as { code: string; status: number; message: string };
      }
      throw new Error("app.invoke resolved");
    };
    const subject = 'the input of flow "inp.target" (app.invoke)';
    expect(await refusal({ s: "lone \uD800" })).toMatchObject({
      code: "OKE1256",
      status: 422,
      message: `${subject}: string at $.s contains a lone UTF-16 surrogate (not valid Unicode)`,
    });
    expect(await refusal({ ["k\u0000"]: 1 })).toMatchObject({ code: "OKE1255", status: 422 });
    expect(await refusal(nested(5_000))).toMatchObject({
      code: "OKE1252",
      status: 422,
      message: `${subject}: nested deeper than 64 levels (or circular) at $${".a".repeat(64)}`,
    });
    expect(await refusal({ s: "x".repeat(MAX_PAYLOAD_BYTES) })).toMatchObject({
      code: "OKE1253",
      status: 422,
      message: `${subject}: input is ${MAX_PAYLOAD_BYTES + 8} bytes as JSON, more than the ${MAX_PAYLOAD_BYTES} a run's input may hold`,
    });
    expect(await app.operator.runs()).toEqual([]);
    // A flow that is not durable stores nothing: its input is not the store's business.
    expect(await app.invoke(plain, { s: "a\u0000" })).toBe(2);
    // At the limits: a run, completed.
    expect(await app.invoke(target, { deep: nested(62), s: "😀 é" })).toEqual({
      deep: nested(62),
      s: "😀 é",
    });
    expect((await app.operator.runs()).map((r) => [r.flow, r.status])).toEqual([["inp.target", "completed"]]);
  });

  it("fx.call of a durable flow with an input past the limits fails the caller with a 500 naming the flow; no child run", async () => {
    const target = flow("inp.child", { durable: true, do: () => "ran" });
    const parent = on(
      http.post("/inp"),
      flow("inp.parent", { durable: true, do: async (_: unknown, fx) => fx.call(target, { s: "\uDC00" }) }),
    );
    const plainParent = on(
      http.post("/inp-plain"),
      flow("inp.plainParent", { do: async (_: unknown, fx) => fx.call(target, { a: nested(70) }) }),
    );
    const app = await apps.make([{ parent, plainParent }]);
    const res = await app.request("/inp", { method: "POST" });
    expect(res.status).toBe(500);
    const { error } = (await res.json()) as { error: { code: string; message: string } };
    expect(error.code).toBe("OKE1256");
    expect(error.message).toBe(
      'the input of flow "inp.child" (fx.call from "inp.parent"): string at $.s contains a lone UTF-16 surrogate (not valid Unicode)',
    );
    const runs = await app.operator.runs();
    expect(runs.map((r) => [r.flow, r.status])).toEqual([["inp.parent", "failed"]]);
    const journal = (await app.operator.run(runs[0]!.id))!.journal;
    expect(journal.map((e) => [e.kind, "name" in e ? e.name : e.label, e.error?.code])).toEqual([
      ["call", "inp.child", "OKE1256"],
    ]);
    // From a flow that is not durable: the same 500, and still no run.
    const plain = await app.request("/inp-plain", { method: "POST" });
    expect(plain.status).toBe(500);
    expect(((await plain.json()) as { error: { code: string; message: string } }).error).toMatchObject({
      code: "OKE1252",
      message:
        'the input of flow "inp.child" (fx.call from "inp.plainParent"): nested deeper than 64 levels (or circular) at $.a' +
        ".a".repeat(63),
    });
    expect((await app.operator.runs()).map((r) => r.flow)).toEqual(["inp.parent"]);
  });
});
