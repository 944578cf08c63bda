/** Which fx.step bodies an effect runs inside: the journal positions each body took, so a replayed step skips them. */
import { AsyncLocalStorage } from "node:async_hooks";

/** One running step body: the positions its effects (and those of steps nested in it) took. */
export interface BodyFrame {
  /** The journal session the step belongs to (a child run's session never counts in its parent's). */
  readonly owner: object;
  /** The body this step was called from, of the same session; its positions include this one's. */
  readonly parent: BodyFrame | undefined;
  readonly taken: number[];
  open: boolean;
}

const scope = new AsyncLocalStorage<BodyFrame>();
/**
 * Bodies running now, in any session. The storage is disabled when none runs: while enabled, Node 20
 * runs an async hook on every promise of the process (~3× the cost of a bare await, measured), which
 * a queue worker sharing the process should not pay between steps.
 */
let running = 0;

/** How many step bodies run now, in any session (for tests: 0 once every attempt settled or parked). */
export const runningBodies = (): number => running;

/** The innermost open body of `owner` the calling code runs inside, if any. */
export function currentBody(owner: object): BodyFrame | undefined {
  if (running === 0) return undefined;
  let f = scope.getStore();
  if (f?.owner !== owner) return undefined;
  // A continuation a finished body left floating counts in the nearest body still open.
  while (f !== undefined && !f.open) f = f.parent;
  return f;
}

/** A frame for a step body about to run, nested in the body the step was called from. */
export const newBody = (owner: object): BodyFrame => ({
  owner,
  parent: currentBody(owner),
  taken: [],
  open: true,
});

/** Runs `fn` as the body of `frame`: every position taken in it (after any await too) is recorded there. */
export async function inBody<T>(frame: BodyFrame, fn: () => Promise<T> | T): Promise<T> {
  running++;
  try {
    return await scope.run(frame, fn);
  } finally {
    closeBody(frame);
  }
}

/**
 * Ends `frame` (once): when its body settles, or when the run parks inside it (a sleep in a step body
 * never settles in this attempt, and must not keep the storage enabled for the life of the process).
 */
export function closeBody(frame: BodyFrame): void {
  if (!frame.open) return;
  frame.open = false;
  if (--running === 0) scope.disable();
}

/** Records position `seq`, just taken, in every open body it runs inside. */
export function recordPosition(owner: object, seq: number): void {
  for (let f = currentBody(owner); f !== undefined; f = f.parent) if (f.open) f.taken.push(seq);
}
