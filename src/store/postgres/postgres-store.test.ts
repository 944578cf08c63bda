// The Store contract on postgres, every case on an empty, migrated schema (the poll-only variant: postgres-store-poll.test.ts).
import { describeStoreConformance } from "../conformance/suite.ts";
import { conformanceFactory as factory, PG_CONFORMANCE_OPTIONS } from "./test-support.ts";

describeStoreConformance("postgres", factory("conf", {}), PG_CONFORMANCE_OPTIONS);
