// A seam on FileHandle.datasync for the file driver's tests: counts flushes and can hold one in flight.
import { open, type FileHandle } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { vi } from "vitest";

export interface FsyncGate {
  /** datasync calls since the gate was installed. */
  readonly calls: number;
  /** Resolves once the next held datasync is waiting (the flush is in flight). */
  reached(): Promise<void>;
  /** Lets the held datasync (and every later one) through. */
  release(): void;
  restore(): void;
}

/**
 * Replaces FileHandle.prototype.datasync for the whole process: every call is
 * counted; with `hold`, the first one waits for release(). The count depends
 * on the code alone (how records are grouped), not on the disk's speed.
 */
export async function installFsyncGate({ hold }: { hold: boolean }): Promise<FsyncGate> {
  const probe = await open(join(tmpdir(), `oke-fsync-probe-${process.pid}`), "w");
  const proto = Object.getPrototypeOf(probe) as FileHandle;
  await probe.close();
  const real = proto.datasync; // eslint-disable-line @typescript-eslint/unbound-method
  let calls = 0;
  let holding = hold;
  let reachedResolve: () => void = () => undefined;
  const reachedPromise = new Promise<void>((r) => (reachedResolve = r));
  let releaseResolve: () => void = () => undefined;
  const released = new Promise<void>((r) => (releaseResolve = r));
  const spy = vi.spyOn(proto, "datasync").mockImplementation(async function (this: FileHandle) {
    calls++;
    if (holding) {
      holding = false;
      reachedResolve();
      await released;
    }
    return real.call(this);
  });
  return {
    get calls() {
      return calls;
    },
    reached: () => reachedPromise,
    release: () => releaseResolve(),
    restore: () => spy.mockRestore(),
  };
}
