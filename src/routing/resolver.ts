import type { Provider } from '../providers/types.ts';

/** One concrete place a request can be executed: a provider instance and its own model id. */
export interface Target {
  provider: Provider;
  /** The provider's own model id. */
  model: string;
  /** `provider/model`, the qualified id clients can use. */
  id: string;
}

/** What a requested model name resolved to: the ordered candidates, the first being the primary. */
export interface Route {
  requested: string;
  candidates: Target[];
}

export interface ModelListing {
  id: string;
  ownedBy: string;
}

/**
 * Resolves client model names to targets. Built once at start-up from the providers' model lists,
 * so resolving is a map lookup. Aliases and failover plug in as extra route sources (see routing/).
 */
export class Resolver {
  readonly #providers = new Map<string, Provider>();
  readonly #modelsByProvider = new Map<string, Set<string>>();
  /** bare model id → first provider (in config order) that serves it */
  readonly #firstServer = new Map<string, Target>();
  readonly #listing: ModelListing[] = [];

  constructor(providers: readonly Provider[], modelsByProvider: ReadonlyMap<string, readonly string[]>) {
    for (const provider of providers) {
      this.#providers.set(provider.name, provider);
      const models = modelsByProvider.get(provider.name) ?? [];
      this.#modelsByProvider.set(provider.name, new Set(models));
      for (const model of models) {
        const target = makeTarget(provider, model);
        if (!this.#firstServer.has(model)) this.#firstServer.set(model, target);
        this.#listing.push({ id: target.id, ownedBy: provider.name });
      }
    }
  }

  provider(name: string): Provider | undefined {
    return this.#providers.get(name);
  }

  providers(): Provider[] {
    return [...this.#providers.values()];
  }

  /** A single target for a model name: `provider/model` or a bare model. Aliases are not targets. */
  target(name: string): Target | undefined {
    const slash = name.indexOf('/');
    if (slash > 0) {
      const provider = this.#providers.get(name.slice(0, slash));
      if (provider) {
        const model = name.slice(slash + 1);
        const known = this.#modelsByProvider.get(provider.name);
        // A provider whose model list is unknown (discovery failed) accepts any qualified model:
        // the upstream is the judge then.
        if (model !== '' && (known === undefined || known.size === 0 || known.has(model))) {
          return makeTarget(provider, model);
        }
        return undefined;
      }
    }
    return this.#firstServer.get(name);
  }

  resolve(name: string): Route | undefined {
    const target = this.target(name);
    return target ? { requested: name, candidates: [target] } : undefined;
  }

  listModels(): readonly ModelListing[] {
    return this.#listing;
  }
}

export function makeTarget(provider: Provider, model: string): Target {
  return { provider, model, id: `${provider.name}/${model}` };
}
