/** Time-ordered unique ids (ms time + counter + random), sortable as strings. */
import { randomBytes } from "node:crypto";

const ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz";
let lastTime = -1;
let counter = 0;
// Random bytes are drawn in blocks: one syscall per 512 ids instead of one per id.
let pool = randomBytes(0);
let poolAt = 0;

const randomChars = (n: number): string => {
  if (poolAt + n > pool.length) {
    pool = randomBytes(Math.max(512 * n, n));
    poolAt = 0;
  }
  let out = "";
  for (let i = 0; i < n; i++) out += ALPHABET[pool[poolAt++]! & 31];
  return out;
};

/**
 * A 26-char id that sorts by creation time (ms, then a per-ms counter) and
 * carries 12 random chars, so ids from many processes do not collide.
 */
export function newId(now: number = Date.now()): string {
  if (now === lastTime) counter++;
  else {
    lastTime = now;
    counter = 0;
  }
  return now.toString(32).padStart(10, "0") + counter.toString(32).padStart(4, "0") + randomChars(12);
}
