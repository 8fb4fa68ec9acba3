/**
 * The storage contract: the suites every Storage implementation must pass, one per aggregate and
 * one for the database as a whole, so SQLite, PostgreSQL and memory cannot drift apart. Each
 * implementation's test file runs them all with its harness.
 */
import { batchFilesContract } from './batch-files.contract.ts';
import { budgetsContract } from './budgets.contract.ts';
import { countersContract } from './counters.contract.ts';
import type { Harness } from './harness.ts';
import { keysContract } from './keys.contract.ts';
import { refusalsContract } from './refusals.contract.ts';
import { rulesContract } from './rules.contract.ts';
import { storageContract } from './storage.contract.ts';
import { usageContract } from './usage.contract.ts';

const CONTRACTS = [storageContract, keysContract, rulesContract, budgetsContract, usageContract, refusalsContract, countersContract, batchFilesContract];

export function storageContracts(name: string, harness: Harness): void {
  for (const contract of CONTRACTS) contract(name, harness);
}
