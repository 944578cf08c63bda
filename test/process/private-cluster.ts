// A throwaway PostgreSQL cluster of a test's own (initdb + pg_ctl on a free port), so the test may stop and restart it.
import { execFile } from "node:child_process";
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll } from "vitest";
import { freePort } from "../support/free-port.ts";

const run = promisify(execFile);

function findBin(name: string): string | undefined {
  for (const dir of (process.env.PATH ?? "").split(":"))
    if (existsSync(join(dir, name))) return join(dir, name);
  if (!existsSync("/usr/lib/postgresql")) return undefined;
  for (const v of readdirSync("/usr/lib/postgresql").sort().reverse()) {
    const p = `/usr/lib/postgresql/${v}/bin/${name}`;
    if (existsSync(p)) return p;
  }
  return undefined;
}

export interface PrivateCluster {
  url: string;
  /** A fast shutdown then a start (connections are cut, committed data stays). */
  restart(): Promise<void>;
  /** A fast shutdown: the server is down until start(). */
  stop(): Promise<void>;
  start(): Promise<void>;
  /** An immediate stop (a crash: WAL not yet written out is lost); the data stays for start(). */
  crash(): Promise<void>;
  /** An immediate stop, then the cluster's directory is removed. */
  destroy(): Promise<void>;
}

/** True when this machine can run a cluster of its own (tests throw rather than skip when it cannot). */
export function canRunPrivateCluster(): boolean {
  const isRoot = process.getuid?.() === 0;
  return (
    findBin("initdb") !== undefined &&
    findBin("pg_ctl") !== undefined &&
    (!isRoot || (findBin("runuser") !== undefined && /^postgres:/m.test(readFileSync("/etc/passwd", "utf8"))))
  );
}

/** Never the shared server: a cluster in a temp dir, as the postgres account when running as root. */
export async function startPrivateCluster(
  /** Extra server settings (`name=value`), e.g. to hold async commits in the WAL buffers. */
  settings: readonly string[] = [],
): Promise<PrivateCluster> {
  const initdb = findBin("initdb");
  const pgCtl = findBin("pg_ctl");
  const isRoot = process.getuid?.() === 0;
  if (initdb === undefined || pgCtl === undefined || !canRunPrivateCluster())
    throw new Error("a private cluster needs initdb, pg_ctl and (as root) a postgres account");
  const asPg = (bin: string, args: string[]) =>
    isRoot ? run("runuser", ["-u", "postgres", "--", bin, ...args]) : run(bin, args);
  const dir = mkdtempSync(join(tmpdir(), "oke-pgc-"));
  if (isRoot) chownSync(dir, Number((await run("id", ["-u", "postgres"])).stdout.trim()), 0);
  const port = await freePort();
  const ctl = (...args: string[]) =>
    asPg(pgCtl, [
      "-D",
      join(dir, "data"),
      "-w",
      "-l",
      join(dir, "log"),
      ...args,
      "-o",
      [
        `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200`,
        ...settings.map((kv) => `-c ${kv}`),
      ].join(" "),
    ]);
  await asPg(initdb, ["-D", join(dir, "data"), "-A", "trust", "-U", "postgres", "--no-sync"]);
  await ctl("start");
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    restart: async () => {
      await ctl("-m", "fast", "restart");
    },
    stop: async () => {
      await ctl("-m", "fast", "stop");
    },
    start: async () => {
      await ctl("start");
    },
    crash: async () => {
      await ctl("-m", "immediate", "stop");
    },
    destroy: async () => {
      await ctl("-m", "immediate", "stop").catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * The private cluster of one test file: started in a beforeAll (initdb takes a while: 120 s allowed),
 * destroyed in an afterAll. The handle is usable from the tests and hooks that run after it started
 * (fleet's url(), restarts, crashes); before that it throws rather than hand out an empty url.
 */
export function usePrivateCluster(settings: readonly string[] = []): PrivateCluster {
  let cluster: PrivateCluster | undefined;
  beforeAll(async () => {
    cluster = await startPrivateCluster(settings);
  }, 120_000);
  afterAll(async () => {
    await cluster?.destroy();
  });
  const started = (): PrivateCluster => {
    if (cluster === undefined)
      throw new Error("the private cluster is not started yet (usePrivateCluster's beforeAll)");
    return cluster;
  };
  return {
    get url() {
      return started().url;
    },
    restart: () => started().restart(),
    stop: () => started().stop(),
    start: () => started().start(),
    crash: () => started().crash(),
    destroy: () => started().destroy(),
  };
}
