// The shape of one PostgreSQL schema change (new migrations import it from here, not from index.ts).

/** One schema change. `sql` receives the quoted schema identifier. */
export interface Migration {
  /** Position in the sequence; ids increase (gaps allowed) and are never reused. */
  id: number;
  name: string;
  sql: (schema: string) => string;
}
