import { describeStoreConformance } from "../conformance/suite.ts";
import { dropSchema, freshSchema, openStore } from "./test-support.ts";

// The whole contract, every case on a fresh schema (migrated by open()).
describeStoreConformance(
  "postgres",
  async () => {
    const schema = freshSchema("conf");
    const store = await openStore(schema, { poolSize: 2 });
    return {
      store,
      cleanup: async () => {
        await store.close();
        await dropSchema(schema);
      },
    };
  },
  { supportsTx: true },
);
