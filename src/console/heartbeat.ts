/** Each app instance writes a heartbeat to the store, so the Console can list the fleet: who is alive, which version, what it runs. */
import { readFileSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import type { InstanceRole } from "../app/config.ts";
import type { Clock } from "../clock/clock.ts";
import type { Logger } from "../log/logger.ts";
import type { InstanceInfo } from "../store/console-types.ts";
import type { Store } from "../store/types.ts";
import { okengineVersion } from "../okengine-version.ts";

export const HEARTBEAT_MS = 10_000;
/** An instance not heard from for this long is not listed as alive. */
export const ALIVE_MS = 3 * HEARTBEAT_MS;

/** The app's own version, from the project's package.json. */
const appVersion = (root: string): string | undefined => {
  try {
    const v = (JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { version?: unknown }).version;
    return typeof v === "string" ? v : undefined;
  } catch {
    return undefined;
  }
};

export interface HeartbeatDeps {
  store: Store;
  clock: Clock;
  logger: Logger;
  instanceId: string;
  env: string;
  root: string;
  flows: string[];
  signals: string[];
  /** What this instance runs (instance.role), so the fleet can tell web instances from workers. */
  role: InstanceRole;
}

/** An instance's role; a heartbeat from an okengine before roles were sent has none: it ran everything. */
export const roleOf = (i: Pick<InstanceInfo, "role">): InstanceRole => i.role ?? "all";

export interface Heartbeat {
  /** The Console address this instance serves, shown to the fleet. */
  setConsole(url: string | null): void;
  /** Stops beating and leaves the list. */
  stop(): Promise<void>;
}

export function startHeartbeat(d: HeartbeatDeps): Heartbeat {
  const ok = okengineVersion();
  const info: InstanceInfo = {
    id: d.instanceId,
    version: appVersion(d.root) ?? ok,
    okengineVersion: ok,
    host: hostname(),
    pid: process.pid,
    env: d.env,
    startedAt: d.clock.now(),
    flows: d.flows,
    signals: d.signals,
    console: null,
    role: d.role,
  };
  let cancel: (() => void) | undefined;
  let stopped = false;
  let inFlight: Promise<void> = Promise.resolve();
  const beat = (): void => {
    cancel = undefined;
    if (stopped) return;
    // A failed beat is logged and retried on the next tick; the instance keeps working.
    inFlight = d.store.heartbeat(info, d.clock.now()).then(
      () => undefined,
      (e: unknown) => d.logger.warn({ err: e }, "console: heartbeat failed"),
    );
    void inFlight.then(() => {
      if (!stopped) cancel = d.clock.at(d.clock.now() + HEARTBEAT_MS, beat);
    });
  };
  beat();
  return {
    setConsole(url) {
      info.console = url;
      if (cancel) {
        cancel();
        beat();
      }
    },
    async stop() {
      stopped = true;
      cancel?.();
      await inFlight;
      await d.store
        .removeInstance(info.id)
        .catch((e: unknown) => d.logger.warn({ err: e }, "console: could not remove heartbeat"));
    },
  };
}
