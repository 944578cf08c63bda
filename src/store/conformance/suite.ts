/** describeStoreConformance: the whole Store contract as vitest cases, for each driver to run. */
import { describe } from "vitest";
import { attemptBudgetCases } from "./attempt-budget-cases.ts";
import { claimAtEmitCases } from "./claim-at-emit-cases.ts";
import { claimCases } from "./claim-cases.ts";
import { compensationCases } from "./compensation-cases.ts";
import { consoleCases } from "./console-cases.ts";
import { deadLetterCases } from "./dead-letter-cases.ts";
import { eventCases } from "./events-cases.ts";
import { fanoutCases } from "./fanout-cases.ts";
import { fifoCases } from "./fifo-cases.ts";
import { flowFilterCases } from "./flow-filter-cases.ts";
import { idempotencyCases } from "./idempotency-cases.ts";
import type { ConformanceOptions, StoreFactory } from "./harness.ts";
import { journalAppendCases } from "./journal-append-cases.ts";
import { journalLeaseCases } from "./journal-lease-cases.ts";
import { journalParkCases } from "./journal-park-cases.ts";
import { recoveryCases } from "./recovery-cases.ts";
import { releaseCases } from "./release-cases.ts";
import { holdCases } from "./hold-cases.ts";
import { leaveClaimsCases } from "./leave-claims-cases.ts";
import { resettleCases } from "./resettle-cases.ts";
import { retentionCases } from "./retention-cases.ts";
import { scheduleCases } from "./schedule-cases.ts";
import { settleCases } from "./settle-cases.ts";
import { stopLeaseCases } from "./stop-lease-cases.ts";
import { terminateCases } from "./terminate-cases.ts";

export type { ConformanceOptions, StoreFactory, StoreUnderTest } from "./harness.ts";

/**
 * The Store contract as vitest cases. Every driver calls this from its own
 * test file; a behaviour is done when every driver passes. `factory` returns
 * a ready, empty store per case and `cleanup` closes it (and drops its data).
 *
 * @example
 * describeStoreConformance("memory", async () => ({ store: createMemoryStore(), cleanup: async () => {} }));
 */
export function describeStoreConformance(
  driverName: string,
  factory: StoreFactory,
  options: ConformanceOptions = {},
): void {
  describe(`Store conformance: ${driverName}`, () => {
    claimCases(factory, options);
    claimAtEmitCases(factory, options);
    fifoCases(factory);
    settleCases(factory);
    releaseCases(factory);
    leaveClaimsCases(factory, options);
    resettleCases(factory, options);
    deadLetterCases(factory, options);
    attemptBudgetCases(factory);
    journalLeaseCases(factory);
    journalAppendCases(factory, options);
    journalParkCases(factory);
    recoveryCases(factory);
    stopLeaseCases(factory, options);
    holdCases(factory, options);
    terminateCases(factory, options);
    flowFilterCases(factory);
    compensationCases(factory);
    eventCases(factory);
    consoleCases(factory);
    fanoutCases(factory, options);
    scheduleCases(factory, options);
    idempotencyCases(factory);
    retentionCases(factory);
  });
}
