/** The list of postgres migrations, in order (append only). */
import { m0001 } from "./0001-initial.ts";
import { m0002 } from "./0002-key-guard-batch.ts";
import { m0004 } from "./0004-idempotency.ts";
import { m0005 } from "./0005-compensating.ts";
import { m0006 } from "./0006-schedules.ts";
import { m0007 } from "./0007-fanout.ts";
import { m0008 } from "./0008-console.ts";
import { m0010 } from "./0010-run-retention.ts";
import { m0011 } from "./0011-due-runs-by-flow.ts";
import { m0014 } from "./0014-delivered-by-signal.ts";
import { m0015 } from "./0015-run-recoveries.ts";
import { m0017 } from "./0017-journal-functions.ts";
import { m0018 } from "./0018-journal-batch-functions.ts";
import { m0019 } from "./0019-message-replays.ts";
import { m0020 } from "./0020-settle-delivered-one.ts";
import { m0021 } from "./0021-hot-append.ts";
import { m0022 } from "./0022-running-by-list.ts";
import { m0023 } from "./0023-claim-function.ts";
import { m0024 } from "./0024-settle-delivered-batch.ts";
import { m0025 } from "./0025-idempotency-fillfactor.ts";
import { m0026 } from "./0026-claim-held-walk.ts";
import { m0027 } from "./0027-due-sleepers-in-order.ts";
import { m0028 } from "./0028-json-keeps-key-order.ts";
import { m0029 } from "./0029-claim-after-stop.ts";
import { m0030 } from "./0030-run-hold.ts";
import { m0031 } from "./0031-delivered-failed.ts";
import { m0032 } from "./0032-tape-pruned.ts";

// The type lives in migration.ts; migrations 0001–0014 import it from here and stay as shipped (frozen).
export type { Migration } from "./migration.ts";
import type { Migration } from "./migration.ts";

/** Every migration, in order. Append only: a shipped migration never changes. */
export const migrations: readonly Migration[] = [
  m0001,
  m0002,
  m0004,
  m0005,
  m0006,
  m0007,
  m0008,
  m0010,
  m0011,
  m0014,
  m0015,
  m0017,
  m0018,
  m0019,
  m0020,
  m0021,
  m0022,
  m0023,
  m0024,
  m0025,
  m0026,
  m0027,
  m0028,
  m0029,
  m0030,
  m0031,
  m0032,
];
