/** What the Console needs from a running app: its operator API, its store, and who it is. */
import type { Clock } from "../clock/clock.ts";
import type { ResolvedConfig } from "../app/config.ts";
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
  /**
   * The app's project directory (`createApp`'s `root`): `oke` run in another project says so when
   * it reached this app at the default address. Absent from a host that does not say.
   */
  readonly root?: string;
  /**
   * The app's settings the views explain things with (a message's lease, a run's recovery bound);
   * absent from a host that is not an App, whose views then leave them out.
   */
  readonly config?: Pick<ResolvedConfig, "leaseMs" | "durableMaxRecoveries">;
}
