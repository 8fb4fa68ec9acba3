/**
 * Rules indexed by lowercase subject, so finding the rules that govern a request costs
 * O(path depth + matching rules) no matter how many rules exist.
 */
import type { CompiledRule } from './rules.ts';
import type { Scope } from './types.ts';
import { forEachAncestor } from '../user-path/user-path.ts';

type Buckets = Map<string, CompiledRule[]>;

export class RuleIndex {
  /** Every rule by canonical key. */
  readonly byKey = new Map<string, CompiledRule>();
  private readonly userPaths: Buckets = new Map();
  private readonly providers: Buckets = new Map();
  private readonly models: Buckets = new Map();
  private tokenRuleCount = 0;
  private perChildRuleCount = 0;

  get size(): number {
    return this.byKey.size;
  }

  get hasTokenRules(): boolean {
    return this.tokenRuleCount > 0;
  }

  get hasPerChildRules(): boolean {
    return this.perChildRuleCount > 0;
  }

  /** Insert or replace the rule with the same key. */
  put(rule: CompiledRule): void {
    this.remove(rule.key);
    this.byKey.set(rule.key, rule);
    const buckets = this.bucketsFor(rule.scope);
    let bucket = buckets.get(rule.lowerSubject);
    if (bucket === undefined) {
      bucket = [];
      buckets.set(rule.lowerSubject, bucket);
    }
    bucket.push(rule);
    // Within a subject, shorter periods first: a stable, explainable evaluation order.
    bucket.sort((a, b) => a.periodSeconds - b.periodSeconds);
    if (rule.configuredMaxTokens > 0) this.tokenRuleCount++;
    if (rule.perChild) this.perChildRuleCount++;
  }

  remove(key: string): CompiledRule | undefined {
    const rule = this.byKey.get(key);
    if (rule === undefined) return undefined;
    this.byKey.delete(key);
    const buckets = this.bucketsFor(rule.scope);
    const bucket = buckets.get(rule.lowerSubject);
    if (bucket !== undefined) {
      const at = bucket.indexOf(rule);
      if (at >= 0) bucket.splice(at, 1);
      if (bucket.length === 0) buckets.delete(rule.lowerSubject);
    }
    if (rule.configuredMaxTokens > 0) this.tokenRuleCount--;
    if (rule.perChild) this.perChildRuleCount--;
    return rule;
  }

  clear(): void {
    this.byKey.clear();
    this.userPaths.clear();
    this.providers.clear();
    this.models.clear();
    this.tokenRuleCount = 0;
    this.perChildRuleCount = 0;
  }

  /**
   * Append the user-path rules governing `lowerPath` (a normalised, lowercased path),
   * from the root down: `/`, `/a`, `/a/b`, ... Segment boundaries are respected, so a
   * rule on `/a` governs `/a/b` but not `/a-b`.
   */
  collectUserPath(lowerPath: string, out: CompiledRule[]): void {
    if (this.userPaths.size === 0) return;
    forEachAncestor(lowerPath, (path) => appendAll(this.userPaths.get(path), out));
  }

  collectProvider(lowerProvider: string, out: CompiledRule[]): void {
    appendAll(this.providers.get(lowerProvider), out);
  }

  /**
   * Model rules for an executed (provider, model): a qualified subject `provider/model`
   * covers that provider only; a bare subject covers the model on any provider. Model
   * ids may contain `/` themselves, so both lookups are exact string matches.
   */
  collectModel(lowerProvider: string, lowerModel: string, out: CompiledRule[]): void {
    if (this.models.size === 0) return;
    appendAll(this.models.get(`${lowerProvider}/${lowerModel}`), out);
    appendAll(this.models.get(lowerModel), out);
  }

  private bucketsFor(scope: Scope): Buckets {
    switch (scope) {
      case 'user_path':
        return this.userPaths;
      case 'provider':
        return this.providers;
      case 'model':
        return this.models;
    }
  }
}

function appendAll(rules: readonly CompiledRule[] | undefined, out: CompiledRule[]): void {
  if (rules === undefined) return;
  for (const rule of rules) out.push(rule);
}
