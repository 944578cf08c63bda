/** The memory driver's public surface. */
export {
  createEngineStore,
  createMemoryStore,
  type EngineStoreOptions,
  type StoreEngine,
} from "./memory-store.ts";
export { MemoryEngine, applyOp, type EngineOp, type EngineSnapshot } from "./memory-engine.ts";
