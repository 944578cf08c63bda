/** fx.using: resources disposed in reverse order when an attempt ends. */
import type { Resource } from "./types.ts";

/** Resources registered with fx.using, disposed in reverse order when the attempt ends. */
export class ResourceScope {
  private readonly items: Resource[] = [];

  /** True while nothing is registered (most attempts): dispose() would have nothing to do. */
  get empty(): boolean {
    return this.items.length === 0;
  }

  add<T extends Resource>(r: T): T {
    if (typeof r !== "object" || r === null)
      throw new TypeError(
        "fx.using(resource): resource must be an object with a dispose, close, release or end method",
      );
    const ok =
      Symbol.asyncDispose in r || Symbol.dispose in r || "close" in r || "release" in r || "end" in r;
    if (!ok)
      throw new TypeError(
        "fx.using(resource): resource must have [Symbol.asyncDispose], [Symbol.dispose], close(), release() or end()",
      );
    this.items.push(r);
    return r;
  }

  /** Disposes everything; returns the errors so the caller can log them (the attempt's own outcome wins). */
  async dispose(): Promise<unknown[]> {
    const errors: unknown[] = [];
    while (this.items.length > 0) {
      const r = this.items.pop()!;
      try {
        if (Symbol.asyncDispose in r) await r[Symbol.asyncDispose]();
        else if (Symbol.dispose in r) r[Symbol.dispose]();
        else if ("close" in r) await r.close();
        else if ("release" in r) await r.release();
        else await r.end();
      } catch (e) {
        errors.push(e);
      }
    }
    return errors;
  }
}
