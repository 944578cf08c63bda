// The shape of one PostgreSQL schema change (new migrations import it from here, not from index.ts).

/** One schema change. `sql` receives the quoted schema identifier. */
export interface Migration {
  /** Position in the sequence; ids increase (gaps allowed) and are never reused. */
  id: number;
  name: string;
  sql: (schema: string) => string;
  /**
   * The oldest okengine this migration leaves working, as the id of the last migration that code
   * knows: such code still boots on a schema where this one is applied (a rollback, or an instance
   * of the previous version restarting mid-deploy). Recorded with the migration, since older code
   * cannot know it. Default: this migration's own id — older code refuses to boot (OKE1332). Set it
   * only for a change older code provably runs with (e.g. a function body it calls the same way),
   * and to the OLDEST such code, not the previous migration by habit: an upgrade that brings several
   * migrations waits for (OKE1335) the highest `runsWith` among them, so one set too high turns an
   * upgrade across releases into a stop-then-start (0030–0032 said 29–31 where 28 held; a rolling
   * deploy from 28 was refused).
   */
  runsWith?: number;
}
