/** `okengine/store/conformance`: the cases every built-in driver passes, as vitest suites, so a
 * third-party driver proves itself the same way. Needs vitest (an optional peer dependency).
 *
 * ```ts
 * import { describeStoreConformance } from "okengine/store/conformance";
 * describeStoreConformance("my-driver", async () => {
 *   const store = createMyStore();
 *   await store.open();
 *   return { store, cleanup: () => store.close() };
 * });
 * ```
 */
export { describeStoreConformance } from "./store/conformance/suite.ts";
export type { ConformanceOptions, StoreFactory, StoreUnderTest } from "./store/conformance/suite.ts";
