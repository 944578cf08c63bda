/** What the Console needs from a running app: its operator API, its store, and who it is. */
import type { Clock } from "../clock/clock.ts";
import type { Manifest } from "../app/manifest.ts";
import type { Env, OperatorApi } from "../app/types.ts";
import type { Logger } from "../log/logger.ts";
import type { Store } from "../store/types.ts";

export interface ConsoleHost {
  readonly env: Env;
  readonly manifest: Manifest;
  readonly logger: Logger;
  readonly clock: Clock;
  readonly store: Store;
  readonly operator: OperatorApi;
  /** This instance's holder id (lease owners start with it). */
  readonly instanceId: string;
}
