// The Store contract on postgres, every case on an empty, migrated schema (the poll-only variant: postgres-store-poll.test.ts).
import { describeStoreConformance } from "../conformance/suite.ts";
import { conformanceFactory as factory } from "./test-support.ts";

describeStoreConformance("postgres", factory("conf", {}), {
  supportsTx: true,
  claimAtEmit: true,
  leaveToLease: true,
  leaveClaimsToLease: true,
  resettleDelivered: true,
  releaseHold: true,
});
