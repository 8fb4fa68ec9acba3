/**
 * The one storage: a repository per aggregate, each with its SQLite, PostgreSQL and in-memory
 * implementation side by side in its own folder (keys/, rules/, budgets/, usage/, counters/,
 * batch-files/, refusals/), composed here with what belongs to the database as a whole. Callers
 * never know which database sits behind it; every implementation passes the same contract tests.
 * Nothing on the request hot path awaits storage: keys, rules and budgets are loaded into memory at
 * start-up, usage is written in batches.
 */
import type { BatchRepository, FileRepository } from './batch-files/types.ts';
import type { BudgetRepository } from './budgets/types.ts';
import type { CounterRepository } from './counters/types.ts';
import type { KeyRepository } from './keys/types.ts';
import type { RefusalRepository } from './refusals/types.ts';
import type { RuleRepository } from './rules/types.ts';
import type { ChangeListener, WatchedAggregate } from './shared/watch.ts';
import type { UsageRepository } from './usage/types.ts';

export type { ChangeListener, WatchedAggregate } from './shared/watch.ts';

export interface Storage {
  readonly keys: KeyRepository;
  readonly rules: RuleRepository;
  readonly budgets: BudgetRepository;
  readonly usage: UsageRepository;
  /** The saved windows of the in-memory rate-limit counters. */
  readonly counters: CounterRepository;
  readonly files: FileRepository;
  readonly batches: BatchRepository;
  readonly refusals: RefusalRepository;

  /** Applies pending schema migrations; idempotent. */
  migrate(): Promise<void>;
  /**
   * Calls `listener` soon after `aggregate` changes through another connection to the same
   * storage (another replica), and whenever changes may have been missed (a lost connection, back
   * again); it may be called for this connection's own changes too, and — on SQLite, whose
   * `data_version` cannot tell tables apart — for a change to anything in the file. Resolves once
   * watching, with a function that stops it.
   */
  watch(aggregate: WatchedAggregate, listener: ChangeListener): Promise<() => Promise<void>>;
  /** One cheap round trip proving storage answers (readiness, `GET /ready`); rejects when it does not. */
  ping(): Promise<void>;
  /** Idempotent; stops every watch. */
  close(): Promise<void>;
}
