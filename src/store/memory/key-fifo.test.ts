// Deque and KeyFifo, the memory driver's per-key structures.
import { describe, expect, it } from "vitest";
import { Deque } from "./deque.ts";
import { KeyFifo } from "./key-fifo.ts";

const m = (seq: number) => ({ seq });

describe("Deque", () => {
  it("pushes and shifts at both ends across growth", () => {
    const d = new Deque<number>();
    for (let i = 0; i < 40; i++) d.pushBack(i);
    for (let i = 1; i <= 40; i++) d.pushFront(-i);
    expect(d.size).toBe(80);
    expect(d.peekFront()).toBe(-40);
    expect(d.peekBack()).toBe(39);
    expect([...d]).toEqual([
      ...Array.from({ length: 40 }, (_, i) => i - 40),
      ...Array.from({ length: 40 }, (_, i) => i),
    ]);
    for (let i = -40; i < 40; i++) expect(d.shift()).toBe(i);
    expect(d.shift()).toBeUndefined();
    expect(d.peekFront()).toBeUndefined();
  });

  it("inserts in the middle after wrapping around", () => {
    const d = new Deque<number>();
    for (let i = 0; i < 10; i++) d.pushBack(i);
    for (let i = 0; i < 8; i++) d.shift();
    for (let i = 10; i < 20; i++) d.pushBack(i);
    d.insertAt(3, 99);
    d.insertAt(0, -1);
    d.insertAt(d.size, 100);
    expect([...d]).toEqual([-1, 8, 9, 10, 99, 11, 12, 13, 14, 15, 16, 17, 18, 19, 100]);
    expect(d.at(4)).toBe(99);
    expect(d.at(99)).toBeUndefined();
  });
});

describe("KeyFifo", () => {
  it("hands out one head per key; the next head only after release", () => {
    const f = new KeyFifo<{ seq: number }>();
    const [a1, a2, b1] = [m(1), m(2), m(3)];
    f.addPending("a", a1);
    f.addPending("a", a2);
    f.addPending("b", b1);
    expect(f.take()).toBe(a1);
    expect(f.take()).toBe(b1);
    expect(f.take()).toBeUndefined();
    f.release("a", a1);
    expect(f.take()).toBe(a2);
    f.release("a", a2);
    f.release("b", b1);
    expect(f.readyCount).toBe(0);
    expect(f.lane("a")).toBeUndefined();
  });

  it("a retried head goes first in its lane and its lane jumps the ready queue", () => {
    const f = new KeyFifo<{ seq: number }>();
    const [a1, a2, b1] = [m(1), m(2), m(3)];
    f.addPending("b", b1);
    f.addPending("a", a1);
    f.addPending("a", a2);
    expect(f.nextSeq()).toBe(3);
    expect(f.take()).toBe(b1);
    expect(f.take()).toBe(a1);
    f.release("b", b1);
    f.addPending("b", m(4));
    f.retry("a", a1);
    expect(f.nextSeq()).toBe(1);
    expect(f.take()).toBe(a1);
  });

  it("keeps a lane in seq order when an older message is added later, and never queues a busy lane", () => {
    const f = new KeyFifo<{ seq: number }>();
    const [x5, x7, x3, x6] = [m(5), m(7), m(3), m(6)];
    f.addPending("x", x5);
    expect(f.take()).toBe(x5);
    f.addPending("x", x7);
    f.addPending("x", x3);
    f.addPending("x", x6);
    expect(f.readyCount).toBe(0);
    expect(f.hasOlderPending("x", 5)).toBe(true);
    f.release("x", x5);
    expect([f.take(), (f.release("x", x3), f.take()), (f.release("x", x6), f.take())]).toEqual([x3, x6, x7]);
  });

  it("release by a message that is not the lane's inflight one changes nothing", () => {
    const f = new KeyFifo<{ seq: number }>();
    const [a1, a2] = [m(1), m(2)];
    f.addPending("a", a1);
    f.addPending("a", a2);
    expect(f.take()).toBe(a1);
    f.release("a", a2);
    expect(f.take()).toBeUndefined();
  });
});
