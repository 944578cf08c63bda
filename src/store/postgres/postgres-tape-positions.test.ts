// PostgreSQL tape positions: one sequence value per entry, and the store-wide bound read from the sequence.
import { describe, expect, it } from "vitest";
import type { NewTapeEntry } from "../fanout-types.ts";
import { useSchemaStores } from "./test-support.ts";

const T0 = 1_700_000_000_000;
const entry = (id: string, key = "k1"): NewTapeEntry => ({ id, signal: "live.p", key, payload: { id } });

describe("postgres tape positions", () => {
  const pg = useSchemaStores("tape_pos", { poolSize: 8 });

  it("takes one sequence value per entry, on a tape's first append and on every later one", async () => {
    const s = pg.store;
    expect(await s.lastTapePosition!()).toBe(0);
    const positions: number[] = [];
    for (const id of ["a1", "a2", "a3"]) positions.push((await s.appendTape([entry(id)], T0))[0]!.position);
    positions.push((await s.appendTape([entry("b1", "k2")], T0))[0]!.position);
    positions.push(...(await s.appendTape([entry("a4"), entry("b2", "k2")], T0)).map((e) => e.position));
    expect(positions).toEqual([1, 2, 3, 4, 5, 6]);
    expect(await s.lastTapePosition!()).toBe(6);
    expect(await s.tapeHead("live.p", "k1")).toBe(5);
    expect(await s.tapeHead("live.p", "k2")).toBe(6);
  });

  it("appends racing for a tape's first entry each get their own position; the head is the last", async () => {
    const s = pg.store;
    const before = await s.lastTapePosition!();
    const out = await Promise.all(
      Array.from({ length: 8 }, (_, i) => s.appendTape([entry(`r${i}`, "race")], T0)),
    );
    const got = out.map((o) => o[0]!.position).sort((a, b) => a - b);
    expect(new Set(got).size).toBe(8);
    expect(got[0]).toBeGreaterThan(before);
    expect(await s.tapeHead("live.p", "race")).toBe(got[7]);
    expect(await s.lastTapePosition!()).toBeGreaterThanOrEqual(got[7]!);
  });

  it("a tape pruned empty loses its head but not the bound; its next entry comes after every position given", async () => {
    const s = pg.store;
    const [e] = await s.appendTape([entry("gone", "pruned")], T0);
    expect(await s.pruneTape("live.p", T0 + 1, 1_000)).toBeGreaterThan(0);
    expect(await s.tapeHead("live.p", "pruned")).toBe(0);
    const last = await s.lastTapePosition!();
    expect(last).toBeGreaterThanOrEqual(e!.position);
    const [next] = await s.appendTape([entry("back", "pruned")], T0 + 2);
    expect(next!.position).toBe(last + 1);
    expect(await s.lastTapePosition!()).toBe(next!.position);
  });
});
