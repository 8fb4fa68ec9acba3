import type { Provider } from '../providers/types.ts';
import { AliasBalancer, type AliasDefinition } from './aliases.ts';
import type { Route, Target } from './types.ts';

export interface ModelListing {
  id: string;
  ownedBy: string;
}

export interface RoutingConfig {
  aliases?: Readonly<Record<string, AliasDefinition>>;
  /** model name (alias, `provider/model` or bare) → ordered candidate model names */
  failover?: Readonly<Record<string, readonly string[]>>;
}

/**
 * Resolves client model names to targets. Everything is built once at start-up, so resolving a
 * direct model is a map lookup returning a shared Route; an alias costs one balancer step.
 */
export class Resolver {
  readonly #providers = new Map<string, Provider>();
  readonly #modelsByProvider = new Map<string, Set<string>>();
  /** `provider/model` and bare model ids → their direct route */
  readonly #direct = new Map<string, Route>();
  readonly #aliases = new Map<string, AliasBalancer>();
  readonly #failover = new Map<string, readonly Target[]>();
  readonly #listing: ModelListing[] = [];

  constructor(providers: readonly Provider[], modelsByProvider: ReadonlyMap<string, readonly string[]>, routing: RoutingConfig = {}) {
    for (const provider of providers) {
      this.#providers.set(provider.name, provider);
      const models = modelsByProvider.get(provider.name) ?? [];
      this.#modelsByProvider.set(provider.name, new Set(models));
      for (const model of models) this.#listing.push({ id: `${provider.name}/${model}`, ownedBy: provider.name });
    }
    for (const [name, candidates] of Object.entries(routing.failover ?? {})) {
      this.#failover.set(name, candidates.map((candidate) => this.#requireTarget(candidate, `failover.${name}`)));
    }
    for (const [name, alias] of Object.entries(routing.aliases ?? {})) {
      const targets = alias.targets.map((t, i) => this.#requireTarget(t.model, `aliases.${name}.targets[${i}]`));
      const failover = this.#failover.get(name) ?? [];
      this.#aliases.set(name, new AliasBalancer(alias, targets, name, failover));
      this.#listing.push({ id: name, ownedBy: 'floodgate' });
    }
    for (const provider of providers) {
      for (const model of modelsByProvider.get(provider.name) ?? []) {
        const target = makeTarget(provider, model);
        const route = this.#directRoute(target, target.id);
        this.#direct.set(target.id, route);
        // An alias with the same name as a bare model wins: it is listed, so it must be reachable.
        if (!this.#direct.has(model) && !this.#aliases.has(model)) this.#direct.set(model, this.#directRoute(target, model));
      }
    }
  }

  provider(name: string): Provider | undefined {
    return this.#providers.get(name);
  }

  resolve(name: string): Route | undefined {
    const direct = this.#direct.get(name);
    if (direct !== undefined) return direct;
    const alias = this.#aliases.get(name);
    if (alias !== undefined) return alias.next();
    // A provider whose model list is unknown (discovery failed) accepts any qualified model:
    // the upstream is the judge then.
    const target = this.#openTarget(name);
    return target ? this.#directRoute(target, name) : undefined;
  }

  /** What resolve() would return now, without taking an alias's turn (for a dry run). */
  preview(name: string): Route | undefined {
    const alias = this.#direct.has(name) ? undefined : this.#aliases.get(name);
    return alias !== undefined ? alias.peek() : this.resolve(name);
  }

  /**
   * The cache key model of a name without resolving it: a cache hit must not take an alias's
   * round-robin or weighted turn. Undefined for an unknown name.
   */
  cacheModelOf(name: string): string | undefined {
    const direct = this.#direct.get(name);
    if (direct !== undefined) return direct.cacheModel;
    const alias = this.#aliases.get(name);
    if (alias !== undefined) return alias.cacheModel;
    return this.#openTarget(name)?.id;
  }

  listModels(): readonly ModelListing[] {
    return this.#listing;
  }

  #directRoute(target: Target, requested: string): Route {
    const failover = this.#failover.get(requested) ?? this.#failover.get(target.id) ?? this.#failover.get(target.model) ?? [];
    return { requested, cacheModel: target.id, primary: [target], failover, first: target };
  }

  #openTarget(name: string): Target | undefined {
    const slash = name.indexOf('/');
    if (slash <= 0) return undefined;
    const provider = this.#providers.get(name.slice(0, slash));
    const model = name.slice(slash + 1);
    if (!provider || model === '' || (this.#modelsByProvider.get(provider.name)?.size ?? 0) > 0) return undefined;
    return makeTarget(provider, model);
  }

  /** Alias targets and failover candidates must name a model a provider serves. */
  #requireTarget(name: string, where: string): Target {
    const slash = name.indexOf('/');
    const provider = slash > 0 ? this.#providers.get(name.slice(0, slash)) : undefined;
    if (provider) {
      const model = name.slice(slash + 1);
      const known = this.#modelsByProvider.get(provider.name);
      if (model !== '' && (known === undefined || known.size === 0 || known.has(model))) return makeTarget(provider, model);
    }
    for (const [providerName, models] of this.#modelsByProvider) {
      if (models.has(name)) return makeTarget(this.#providers.get(providerName)!, name);
    }
    throw new RoutingError(`${where}: model "${name}" is not served by any configured provider`);
  }
}

export class RoutingError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RoutingError';
  }
}

function makeTarget(provider: Provider, model: string): Target {
  return { provider, model, id: `${provider.name}/${model}` };
}
