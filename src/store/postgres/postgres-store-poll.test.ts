// The Store contract on postgres in poll-only mode (no NOTIFY, no LISTEN), in a file of its own so it runs beside the default variant's.
import { describeStoreConformance } from "../conformance/suite.ts";
import { conformanceFactory as factory, PG_CONFORMANCE_OPTIONS } from "./test-support.ts";

// Poll-only mode (PgBouncer): no NOTIFY, no LISTEN connection. The
// poll period is far away so no synthetic wake lands inside a case.
describeStoreConformance(
  "postgres (poll-only)",
  factory("confpoll", { notify: false, pollIntervalMs: 3_600_000 }),
  PG_CONFORMANCE_OPTIONS,
);
