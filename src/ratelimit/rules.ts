/**
 * Rule identity and the compiled form of a rule: everything the hot path needs (caps as
 * plain numbers, counter handle) is computed once when a rule is written, never per request;
 * a rule's breach record and message once, at its first refusal.
 */
import { normalizeUserPath } from '../user-path/user-path.ts';
import { periodLabel } from './normalize.ts';
import type { CounterHandle, CounterRule } from './store.ts';
import type { Headroom, LimitKind, Priority, RuleDefinition, RuleKey, Scope } from './types.ts';

/** A refused limit, as reported to the client and the logs. */
export interface BreachedLimit {
  readonly scope: Scope;
  /** Whose counter is full: the rule's subject, or the child of a per-child rule (`/team/alice` under `/team`). */
  readonly subject: string;
  /** The rule's own subject, with the spelling of its latest write (a per-child rule's path, never its child's). */
  readonly ruleSubject: string;
  readonly periodSeconds: number;
  /** `minute`, `hour`, `day`, `concurrent` or `<n>s`. */
  readonly label: string;
  readonly kind: LimitKind;
  /** The cap that was reached: a lower priority's share of the rule's cap (see Headroom). */
  readonly cap: number;
  /** The exact client-facing message, e.g. `rate limit exceeded for /team: minute request limit of 10 reached`. */
  readonly message: string;
}

/** Canonical key string of a rule: scope, lowercase subject, period. */
export function ruleKeyString(scope: Scope, lowerSubject: string, periodSeconds: number): string {
  // join builds one flat string, where a template literal builds a rope that is flattened into a
  // second copy the first time the key is hashed; with many rules those copies add up.
  return [scope, lowerSubject, periodSeconds].join('\u0000');
}

/**
 * The key of a rule's counter in the counter store. A plain rule's counter has the rule's key. A
 * per-child rule's counters are the rule key, the separator, then the lowercase child segment
 * (empty for the path's own counter): `per_child` is part of the rule, not its key, yet changing
 * it moves the rule to counters of its own, and a store can find every child of a rule from the
 * key of its own counter (see CounterStore.childCounter).
 */
export function counterKeyOf(ruleKey: string, perChild: boolean): string {
  return perChild ? ruleKey + '\u0000' : ruleKey;
}

/** The counter key of one child of a per-child rule, from the key of the rule's own counter. */
export function childCounterKey(ownKey: string, child: string): string {
  return ownKey + child;
}

/** Identity of an already-normalised rule key, for maps outside the engine (storage, config). */
export function ruleIdentity(key: RuleKey): string {
  return ruleKeyString(key.scope, key.subject.toLowerCase(), key.periodSeconds);
}

/**
 * The canonical key of a caller-supplied RuleKey, or undefined when its subject can't
 * name any rule (e.g. an invalid user path).
 */
export function canonicalKey(key: RuleKey): string | undefined {
  let subject: string;
  if (key.scope === 'user_path') {
    const path = normalizeUserPath(key.subject);
    if (!path.ok) return undefined;
    subject = path.value;
  } else {
    subject = key.subject.trim();
  }
  return ruleKeyString(key.scope, subject.toLowerCase(), key.periodSeconds);
}

/** How the subject reads in a client message: the path, `provider <name>` or `model <subject>`. */
function messageSubject(scope: Scope, subject: string): string {
  switch (scope) {
    case 'user_path':
      return subject;
    case 'provider':
      return `provider ${subject}`;
    case 'model':
      return `model ${subject}`;
  }
}

export class CompiledRule implements CounterRule {
  readonly key: string;
  readonly definition: RuleDefinition;
  readonly scope: Scope;
  readonly lowerSubject: string;
  readonly perChild: boolean;
  /**
   * Whose counter this is, as shown in status records and messages: the subject for the rule's
   * own counter, `<subject>/<child>` for one child's counter of a per-child rule.
   */
  readonly counterOwner: string;
  /** For a child's counter: the rule it belongs to, and the child's lowercase segment. */
  readonly parent: CompiledRule | undefined;
  readonly child: string | undefined;
  readonly periodSeconds: number;
  readonly concurrent: boolean;
  /** 0 = no request cap. */
  readonly maxRequests: number;
  /** Token cap enforced at admission: 0 when absent or when token enforcement is off. */
  readonly maxTokens: number;
  /** Token cap as configured (for charging and status), 0 = none. */
  readonly configuredMaxTokens: number;
  readonly counter: CounterHandle;
  readonly label: string;
  /** Set on a lower priority's view of the rule: its priority, and the fraction of each cap kept from it. */
  readonly share: { readonly priority: Priority; readonly fraction: number } | undefined;
  /**
   * A cap whose share for this priority rounds down to nothing: the rule never admits the
   * priority. (A store reads a cap of 0 as no cap, so the engine refuses before asking it.)
   */
  readonly closed: boolean;
  private readonly enforceTokens: boolean;
  /** This rule as each lower priority sees it, made on first use (see `forPriority`). */
  private shares: [CompiledRule | undefined, CompiledRule | undefined] | undefined;
  /** Built at the rule's first refusal, then kept: most rules never refuse (see requestBreach). */
  private requestBreachRecord: BreachedLimit | undefined;
  private tokenBreachRecord: BreachedLimit | undefined;

  constructor(
    definition: RuleDefinition,
    key: string,
    counter: CounterHandle,
    enforceTokens: boolean,
    parent?: { rule: CompiledRule; child: string },
    share?: { readonly priority: Priority; readonly fraction: number },
  ) {
    this.key = key;
    this.definition = definition;
    this.scope = definition.scope;
    this.lowerSubject = definition.subject.toLowerCase();
    this.perChild = definition.perChild === true;
    this.parent = parent?.rule;
    this.child = parent?.child;
    this.counterOwner = parent === undefined ? definition.subject : childPath(definition.subject, parent.child);
    this.periodSeconds = definition.periodSeconds;
    this.concurrent = definition.periodSeconds === 0;
    this.configuredMaxTokens = this.concurrent ? 0 : (definition.maxTokens ?? 0);
    const requestCap = definition.maxRequests ?? 0;
    const tokenCap = enforceTokens ? this.configuredMaxTokens : 0;
    this.enforceTokens = enforceTokens;
    this.share = share;
    this.maxRequests = shareOf(requestCap, share);
    this.maxTokens = shareOf(tokenCap, share);
    this.closed = (requestCap > 0 && this.maxRequests === 0) || (tokenCap > 0 && this.maxTokens === 0);
    this.counter = counter;
    this.label = periodLabel(this.periodSeconds);
  }

  /**
   * This rule as a request of `priority` meets it: on the same counter, with that priority's share
   * of each cap; the rule itself for a priority that may use the whole cap.
   */
  forPriority(priority: Priority, headroom: Headroom | undefined): CompiledRule {
    if (priority === 'high' || headroom === undefined) return this;
    const fraction = headroom[priority];
    if (fraction === 0) return this;
    const at = priority === 'normal' ? 0 : 1;
    const shares = (this.shares ??= [undefined, undefined]);
    const parent = this.parent === undefined ? undefined : { rule: this.parent, child: this.child! };
    return (shares[at] ??= new CompiledRule(this.definition, this.key, this.counter, this.enforceTokens, parent, { priority, fraction }));
  }

  /** The refusal of this rule's request (or concurrency) cap; undefined without one. */
  get requestBreach(): BreachedLimit | undefined {
    const cap = this.definition.maxRequests ?? 0;
    if (cap === 0) return undefined;
    return (this.requestBreachRecord ??= this.concurrent
      ? this.breach('concurrent', this.maxRequests, `concurrent request limit of ${cap} reached`)
      : this.breach('requests', this.maxRequests, `${this.label} request limit of ${cap} reached`));
  }

  /** The refusal of this rule's token cap; undefined without one. */
  get tokenBreach(): BreachedLimit | undefined {
    if (this.configuredMaxTokens === 0) return undefined;
    const cap = this.share === undefined ? this.configuredMaxTokens : this.maxTokens;
    return (this.tokenBreachRecord ??= this.breach('tokens', cap, `${this.label} token limit of ${this.configuredMaxTokens} reached`));
  }

  /** The refusal of a request whose token estimate alone exceeds this rule's token cap (reservations on). */
  tooLargeBreach(estimate: number): BreachedLimit {
    const breach = this.tokenBreach!;
    return { ...breach, message: `${breach.message} (this request needs an estimated ${estimate} tokens)` };
  }

  /** A per-child rule's refusal of a new child it has no room to count (see LimitKind). */
  childrenBreach(child: string, maxChildren: number): BreachedLimit {
    return {
      scope: this.scope,
      subject: childPath(this.definition.subject, child),
      ruleSubject: this.definition.subject,
      periodSeconds: this.periodSeconds,
      label: this.label,
      kind: 'children',
      cap: maxChildren,
      message: `rate limit exceeded for ${childPath(this.definition.subject, child)}: the ${this.label} limit of ${this.definition.subject} already counts ${maxChildren} active children (rate_limits.max_children)`,
    };
  }

  private breach(kind: LimitKind, cap: number, what: string): BreachedLimit {
    const subject = this.counterOwner;
    return {
      scope: this.scope,
      subject,
      ruleSubject: this.definition.subject,
      periodSeconds: this.periodSeconds,
      label: this.label,
      kind,
      cap,
      message: `rate limit exceeded for ${messageSubject(this.scope, subject)}: ${what}${this.share === undefined ? '' : ` for ${this.share.priority} priority`}`,
    };
  }
}

/** A lower priority's share of a cap (0 = no cap stays 0). */
function shareOf(cap: number, share: { readonly fraction: number } | undefined): number {
  if (share === undefined || cap === 0) return cap;
  // In millionths, exactly: (1 - 0.9) * 10 is 0.9999999999999998 in floating point.
  const keptPerMillion = BigInt(Math.round((1 - share.fraction) * 1_000_000));
  return Number((BigInt(cap) * keptPerMillion) / 1_000_000n);
}

/** The path of a child of `subject` (a normalised user path). */
export function childPath(subject: string, child: string): string {
  return subject === '/' ? `/${child}` : `${subject}/${child}`;
}

const SCOPE_ORDER: Readonly<Record<Scope, number>> = { model: 0, provider: 1, user_path: 2 };

/** Listing order: scope, subject (case-insensitive), period_seconds. */
export function compareRules(a: RuleDefinition, b: RuleDefinition): number {
  if (a.scope !== b.scope) return SCOPE_ORDER[a.scope] - SCOPE_ORDER[b.scope];
  const subjectA = a.subject.toLowerCase();
  const subjectB = b.subject.toLowerCase();
  if (subjectA !== subjectB) return subjectA < subjectB ? -1 : 1;
  return a.periodSeconds - b.periodSeconds;
}
