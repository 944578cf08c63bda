/**
 * S4 (emit → handler start, one job at a time) on PostgreSQL split into its parts: the emit's work
 * before its statement is sent, the statement's round trip (client-observed), and the dispatch from
 * its result to the handler. Same harness as bench/compare/latency.ts; rounds alternate nothing, so
 * run it A/B by hand on a loaded machine.
 *
 *   node --import tsx bench/s4-parts.ts [--n=1000] [--rounds=3]
 */
import { createRequire } from "node:module";
import type pgTypes from "pg";
import { ensureDatabase, percentile, signalled, sleep } from "./compare/env.ts";
import { okengineSystem } from "./compare/okengine.ts";

// The root package's pg (the one src/ loads), not bench/node_modules' copy.
const pg = createRequire(new URL("../package.json", import.meta.url))("pg") as typeof pgTypes;

const arg = (name: string, def: string): string =>
  process.argv.find((a) => a.startsWith(`--${name}=`))?.split("=")[1] ?? def;
const n = Number(arg("n", "1000"));
const rounds = Number(arg("rounds", "3"));

// The INSERT's send and result times, at the client.
let sentAt = 0;
let doneAt = 0;
let statements = 0;
const kinds = new Map<string, number>();
// eslint-disable-next-line @typescript-eslint/unbound-method -- patched and called with apply(this)
const query = pg.Client.prototype.query as (...a: unknown[]) => unknown;
pg.Client.prototype.query = function (this: pgTypes.Client, ...a: unknown[]) {
  statements++;
  const text = typeof a[0] === "string" ? a[0] : ((a[0] as { text?: string }).text ?? "");
  const kind = /INSERT INTO/.test(text)
    ? "insert"
    : /UPDATE/.test(text)
      ? "update"
      : text.trim().slice(0, 30);
  kinds.set(kind, (kinds.get(kind) ?? 0) + 1);
  const cb = a.findIndex((x) => typeof x === "function");
  if (kind === "insert" && cb >= 0) {
    sentAt = performance.now();
    const orig = a[cb] as (...r: unknown[]) => void;
    a[cb] = (...r: unknown[]) => {
      doneAt = performance.now();
      orig(...r);
    };
  }
  return query.apply(this, a);
} as typeof pg.Client.prototype.query;

await ensureDatabase();
const keepAlive = setInterval(() => undefined, 1_000);
const system = okengineSystem("postgres");
for (let r = 1; r <= rounds; r++) {
  const ns = await system.fresh();
  let started: ((at: number) => void) | undefined;
  const h = await system.open(ns, {
    concurrency: 32,
    retries: 3,
    keyed: false,
    handler: () => started?.(performance.now()),
  });
  await h.start();
  await sleep(200);
  const total: number[] = [];
  const before: number[] = [];
  const trip: number[] = [];
  const after: number[] = [];
  const st0 = statements;
  for (let i = 0; i < n; i++) {
    const s = signalled<number>();
    started = s.resolve;
    const t0 = performance.now();
    await h.add({ n: i });
    const t1 = await s.promise;
    total.push(t1 - t0);
    before.push(sentAt - t0);
    trip.push(doneAt - sentAt);
    after.push(t1 - doneAt);
  }
  const sts = (statements - st0) / n;
  console.log(Object.fromEntries(kinds));
  kinds.clear();
  await h.close();
  await system.drop(ns);
  const p = (xs: number[], q: number): string =>
    percentile(
      xs.sort((a, b) => a - b),
      q,
    ).toFixed(3);
  console.log(
    `round ${r}: total p50 ${p(total, 50)} p99 ${p(total, 99)} ms | before send p50 ${p(before, 50)} | ` +
      `round trip p50 ${p(trip, 50)} | result → handler p50 ${p(after, 50)} | statements/emit ${sts.toFixed(2)}`,
  );
}
clearInterval(keepAlive);
