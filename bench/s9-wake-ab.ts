/**
 * S9's wake delay, A/B on a loaded machine: okengine source trees (each `path` or `path:L`, L the
 * postgres driver's wakeLookaheadMs, ignored by trees without it) and DBOS take turns, one batch each
 * per round — S9's batch: `--sleeps` 1 s sleeps started 20 ms apart, the delay being how long after its
 * due time each workflow's code after the sleep runs. Each system keeps one app (one DBOS launch) for
 * the whole run. Prints p50 / p90 / p99 per system and per round, with the load average at each round.
 *
 *   node --import tsx bench/s9-wake-ab.ts <treeA>[:L] [<treeB>[:L] …] [--rounds=6] [--sleeps=60] [--no-dbos]
 *
 * A tree needs node_modules (a symlink to this checkout's works); DBOS comes from bench/node_modules.
 */
import { createRequire } from "node:module";
import { loadavg } from "node:os";
import type pgTypes from "pg";
import { benchLogger } from "./compare/logger.ts";
import { dbosWorkflows } from "./compare/dbos.ts";
import { DATABASE_URL, dropSchema, ensureDatabase, percentile, randomName, sleep } from "./compare/env.ts";
import type { Duration } from "../src/index.ts";

const args = process.argv.slice(2);
const trees = args.filter((a) => !a.startsWith("--"));
const num = (name: string, def: number): number =>
  Number(args.find((a) => a.startsWith(`--${name}=`))?.split("=")[1] ?? def);
const rounds = num("rounds", 6);
const sleeps = num("sleeps", 60);
const SLEEP_MS = 1_000;
if (trees.length === 0) throw new Error("usage: bench/s9-wake-ab.ts <tree>[:L] … [--rounds=6] [--sleeps=60]");

// Client-observed round trips of okengine's claim statements (`WITH due AS …`): what the lookahead must cover.
const pg = createRequire(new URL("../package.json", import.meta.url))("pg") as typeof pgTypes;
const claimMs: number[] = [];
// eslint-disable-next-line @typescript-eslint/unbound-method -- patched and called with apply(this)
const query = pg.Client.prototype.query as (...a: unknown[]) => unknown;
pg.Client.prototype.query = function (this: pgTypes.Client, ...a: unknown[]) {
  const text = typeof a[0] === "string" ? a[0] : ((a[0] as { text?: string } | undefined)?.text ?? "");
  if (!text.trimStart().startsWith("WITH due AS")) return query.apply(this, a);
  const t0 = performance.now();
  const done = (): void => void claimMs.push(performance.now() - t0);
  // pg.Pool#query passes a callback (and gets no promise back).
  const cb = a.at(-1);
  if (typeof cb === "function")
    return query.apply(this, [
      ...a.slice(0, -1),
      (...r: unknown[]) => {
        done();
        return (cb as (...x: unknown[]) => unknown)(...r);
      },
    ]);
  const out = query.apply(this, a);
  if (out instanceof Promise) void out.then(done, () => undefined);
  return out;
} as typeof pg.Client.prototype.query;

interface System {
  label: string;
  sleepOnce(i: number, ms: number): Promise<number>;
  close(): Promise<void>;
}

await ensureDatabase();
const systems: System[] = [];
for (const spec of trees) {
  const [tree, l] = spec.split(":") as [string, string | undefined];
  const src = (await import(`${tree}/src/index.ts`)) as typeof import("../src/index.ts");
  const pgMod = (await import(
    `${tree}/src/store/postgres/postgres-store.ts`
  )) as typeof import("../src/store/postgres/postgres-store.ts");
  const sleptAt = new Map<number, number>();
  const waiters = new Map<number, (delay: number) => void>();
  const sleeper = src.flow<{ i: number; ms: number }, void>("bench.sleep", {
    durable: true,
    do: async ({ i, ms }, fx) => {
      // Code before a sleep runs again on resume: only the first pass stamps the start.
      if (!sleptAt.has(i)) sleptAt.set(i, performance.now());
      await fx.clock.sleep("nap", `${ms}ms` as Duration);
      waiters.get(i)?.(performance.now() - sleptAt.get(i)! - ms);
    },
  });
  const schema = randomName("oke_wake_ab");
  const store = pgMod.createPostgresStore({
    connectionString: DATABASE_URL,
    schema,
    poolSize: 10,
    ...(l === undefined ? {} : { wakeLookaheadMs: Number(l) }),
  });
  const app = src.createApp({
    modules: [{ exports: { sleeper } }],
    env: "prod",
    store,
    logger: benchLogger(),
    root: tree,
    config: {
      console: { port: false },
      drivers: { journal: "postgres", send: "memory" },
      database: { url: DATABASE_URL, schema },
    },
  });
  await app.boot();
  systems.push({
    label: `${tree}${l === undefined ? "" : ` L=${l}`}`,
    sleepOnce: async (i, ms) => {
      const woke = new Promise<number>((res) => waiters.set(i, res));
      await app.invoke(sleeper, { i, ms });
      return woke;
    },
    close: async () => {
      await app.stop({ timeoutMs: 5_000 });
      await dropSchema(schema);
    },
  });
}
if (!args.includes("--no-dbos")) {
  const h = await dbosWorkflows("5").open();
  systems.push({ label: "DBOS", sleepOnce: (i, ms) => h.sleepOnce(i, ms), close: () => h.close() });
}

const all = systems.map((): number[] => []);
let id = 0;
const fmt = (xs: number[]): string => {
  const s = [...xs].sort((a, b) => a - b);
  return `p50 ${percentile(s, 50).toFixed(2)} p90 ${percentile(s, 90).toFixed(2)} p99 ${percentile(s, 99).toFixed(2)}`;
};
for (let r = 0; r < rounds; r++) {
  // Rotate who goes first, so no system always follows the same one.
  for (let j = 0; j < systems.length; j++) {
    const k = (j + r) % systems.length;
    const delays = await Promise.all(
      Array.from({ length: sleeps }, async (_, n) => {
        await sleep(n * 20);
        return systems[k]!.sleepOnce(id++, SLEEP_MS);
      }),
    );
    all[k]!.push(...delays);
    console.log(
      `round ${r + 1} load ${loadavg()
        .map((x) => x.toFixed(1))
        .join("/")} ${systems[k]!.label}: ${fmt(delays)}`,
    );
  }
}
for (const [k, s] of systems.entries())
  console.log(`ALL ${s.label}: ${fmt(all[k]!)} (${all[k]!.length} sleeps)`);
if (claimMs.length > 0)
  console.log(
    `claim round trips, all okengine trees: ${fmt(claimMs)} max ${Math.max(...claimMs).toFixed(2)} (${claimMs.length})`,
  );
for (const s of systems) await s.close();
process.exit(0);
