import { m0001 } from "./0001-initial.ts";
import { m0002 } from "./0002-key-guard-batch.ts";

/** One schema change. `sql` receives the quoted schema identifier. */
export interface Migration {
  /** Position in the sequence; ids are dense and never reused. */
  id: number;
  name: string;
  sql: (schema: string) => string;
}

/** Every migration, in order. Append only: a shipped migration never changes. */
export const migrations: readonly Migration[] = [m0001, m0002];
