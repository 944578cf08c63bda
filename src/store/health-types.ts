/** The Store's health signal: whether it can commit right now, known without doing I/O. */

/** `ok: false` while the store cannot commit; `since` is wall-clock epoch ms, `reason` the last error's text. */
export type StoreHealth = { ok: true } | { ok: false; since: number; reason: string };

export interface HealthStore {
  /**
   * The last known state, without I/O, so a readiness probe may ask on every
   * request. A write that fails for want of the database or the disk turns it
   * `ok: false`; the driver then probes with a bounded check (backing off) and
   * turns it back `ok: true` once a probe commits.
   */
  health(): StoreHealth;
}
