/**
 * DBOS Transact (@dbos-inc/dbos-sdk 5.x, bench/node_modules) for S9: a
 * workflow of 3 `DBOS.runStep` checkpoints and one with `DBOS.sleep(1 000)`,
 * called directly in-process (DBOS's own durable-execution path). The system
 * database is the bench database with its own schema per run, dropped after.
 * DBOS is a process-wide singleton: functions are registered once, then each
 * run is a launch / shutdown on a fresh schema.
 */
import { DATABASE_URL, dropSchema, peer, randomName, signalled } from "./env.ts";
import type { WorkflowSystem } from "./types.ts";

interface DbosStatic {
  setConfig(config: object): void;
  launch(): Promise<void>;
  shutdown(options?: object): Promise<void>;
  registerWorkflow<A extends unknown[], R>(
    fn: (...args: A) => Promise<R>,
    config: { name: string },
  ): (...args: A) => Promise<R>;
  runStep<R>(fn: () => Promise<R>, config: { name: string }): Promise<R>;
  sleep(ms: number): Promise<void>;
}

const silent = {
  info: () => undefined,
  debug: () => undefined,
  warn: () => undefined,
  error: () => undefined,
};
let registered:
  { three: (i: number) => Promise<number>; sleeper: (i: number, ms: number) => Promise<void> } | undefined;
const sleptAt = new Map<number, number>();
const waiters = new Map<number, (delay: number) => void>();

async function dbos(): Promise<DbosStatic> {
  const mod = await peer<{ DBOS?: DbosStatic; default?: { DBOS: DbosStatic } }>("@dbos-inc/dbos-sdk");
  return mod.DBOS ?? mod.default!.DBOS;
}

export function dbosWorkflows(version: string): WorkflowSystem {
  return {
    id: "dbos",
    label: `DBOS Transact ${version}`,
    describe: () => [
      `@dbos-inc/dbos-sdk ${version}: DBOS.registerWorkflow with 3 DBOS.runStep calls, called directly in-process; DBOS.sleep(1 000) for the durable sleep`,
      "system database = the bench database, own schema per run (systemDatabaseSchemaName); systemDatabasePoolSize 10 (default); LISTEN/NOTIFY on (default)",
    ],
    async open() {
      const DBOS = await dbos();
      registered ??= {
        three: DBOS.registerWorkflow(
          async (i: number) => {
            const a = await DBOS.runStep(async () => i + 1, { name: "a" });
            const b = await DBOS.runStep(async () => a * 2, { name: "b" });
            return DBOS.runStep(async () => b + 1, { name: "c" });
          },
          { name: "bench_three" },
        ),
        sleeper: DBOS.registerWorkflow(
          async (i: number, ms: number) => {
            if (!sleptAt.has(i)) sleptAt.set(i, performance.now());
            await DBOS.sleep(ms);
            waiters.get(i)?.(performance.now() - sleptAt.get(i)! - ms);
          },
          { name: "bench_sleep" },
        ),
      };
      const schema = randomName("dbos_bench");
      DBOS.setConfig({
        name: "okengine-bench",
        systemDatabaseUrl: DATABASE_URL,
        systemDatabaseSchemaName: schema,
        logger: silent,
      });
      await DBOS.launch();
      // Called unbound: DBOS treats a `this` as a ConfiguredInstance.
      const { three, sleeper } = registered;
      sleptAt.clear();
      return {
        runThreeSteps: async (i) => {
          await three(i);
        },
        sleepOnce: async (i, ms) => {
          const woke = signalled<number>();
          waiters.set(i, woke.resolve);
          await sleeper(i, ms);
          return woke.promise;
        },
        close: async () => {
          await DBOS.shutdown();
          await dropSchema(schema);
        },
      };
    },
  };
}
