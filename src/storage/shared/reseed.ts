/**
 * What a config re-seed of definitions (rules, budgets) writes, decided once for every
 * implementation so they agree exactly (each runs it inside its own transaction).
 */

/** What a config re-seed writes: stored rows and seeds share these fields. */
export interface Seeded {
  readonly source: 'manual' | 'config';
  readonly createdAt: Date;
  readonly updatedAt: Date;
}

export interface ReseedPlan<T, K> {
  /** Config rows to insert after every existing config row has been deleted. */
  inserts: T[];
  /** Keys that were not written because a manual row holds them. */
  skipped: K[];
}

export interface ReseedKind<T, K> {
  identity(row: T): string;
  key(row: T): K;
  /** True when re-seeding `next` over `prev` would change nothing an operator can see. */
  sameContent(prev: T, next: T): boolean;
}

/** Decides what a config re-seed writes, given the rows currently stored. Pure. */
export function planReseed<T extends Seeded, K>(kind: ReseedKind<T, K>, existing: readonly T[], seeds: readonly T[]): ReseedPlan<T, K> {
  const manual = new Set<string>();
  const oldConfig = new Map<string, T>();
  for (const row of existing) {
    const key = kind.identity(row);
    if (row.source === 'manual') manual.add(key);
    else oldConfig.set(key, row);
  }
  // Last declaration of a key wins, mirroring an upsert applied in order.
  const wanted = new Map<string, T>();
  for (const seed of seeds) wanted.set(kind.identity(seed), seed);

  const inserts: T[] = [];
  const skipped: K[] = [];
  for (const [key, seed] of wanted) {
    if (manual.has(key)) {
      skipped.push(kind.key(seed));
      continue;
    }
    const prev = oldConfig.get(key);
    inserts.push({
      ...seed,
      source: 'config',
      createdAt: prev ? prev.createdAt : seed.createdAt,
      updatedAt: prev && kind.sameContent(prev, seed) ? prev.updatedAt : seed.updatedAt,
    });
  }
  return { inserts, skipped };
}
