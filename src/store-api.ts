/** `okengine/store`: the Store contract for drivers written outside okengine — every type a driver
 * implements, the errors it must raise with the same codes and texts, and the memory driver to
 * compare against or wrap. The conformance suite is `okengine/store/conformance`. See docs/drivers.md.
 */
export type * from "./store/index.ts";
export { storeErrors } from "./store/index.ts";
export { createMemoryStore } from "./store/memory/index.ts";
export { JournalLeaseBusy, OkeError } from "./errors.ts";
