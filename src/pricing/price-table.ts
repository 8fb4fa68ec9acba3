/**
 * The cost of a request in US dollars, from its token counts and the price data bundled with the
 * `@pydantic/genai-prices` package (never fetched at run time: the package only updates its data
 * when asked to, and the gateway never asks). An operator's `pricing:` entry overrides it per
 * `provider/model`.
 *
 * Which of the package's providers prices a Floodgate instance: the one whose API address matches
 * the instance's base URL (an OpenAI-compatible instance at Groq gets Groq's prices), else the
 * one its provider type names (`pricesProvider` in the provider registry), else whichever
 * provider the package finds for the model id alone. A type that names none (`null`) has no
 * prices, only overrides.
 */
import { calcPrice, findProvider, type Provider as PriceProvider } from '@pydantic/genai-prices';

/** The token counts a cost is computed from; `promptTokens` includes the cached ones. */
export interface PricedUsage {
  provider: string;
  /** The model id as the provider executed it. */
  model: string;
  promptTokens: number;
  completionTokens: number;
  cachedPromptTokens: number;
  timestampMs: number;
}

/** An operator's price for one model, per million tokens. */
export interface PriceOverride {
  inputPerMtok: number;
  outputPerMtok: number;
  /** Absent: cached prompt tokens cost the input price. */
  cachedInputPerMtok?: number | undefined;
}

export interface PricedInstance {
  name: string;
  /** The package provider its type's models are priced as; null: no prices; undefined: by model id alone. */
  pricesProvider: string | null | undefined;
  baseUrl?: string | undefined;
}

export interface PriceTableOptions {
  instances: readonly PricedInstance[];
  /** By `provider/model` (instance name and the provider's model id). */
  overrides?: Readonly<Record<string, PriceOverride>>;
  /**
   * Called once per `provider/model` that has no price (its requests cost 0), for the first
   * MAX_UNKNOWN_WARNINGS of them.
   */
  onUnknown?: (provider: string, model: string) => void;
  /** Called once, when MAX_UNKNOWN_WARNINGS models without a price were reported: later ones are not. */
  onUnknownLimit?: (limit: number) => void;
}

/**
 * Models whose prices are remembered at most. Passthrough requests name any model they like, so
 * the table is bounded: past it the oldest entry is forgotten (and looked up again if it returns).
 */
export const MAX_REMEMBERED_MODELS = 10_000;
/** Distinct models without a price that are reported (logged) at most. */
export const MAX_UNKNOWN_WARNINGS = 100;

/**
 * A model's prices: the package provider holding just that model, and, when its prices are flat,
 * the dollars per token they come to.
 */
interface ModelPrices {
  provider: PriceProvider;
  perToken: { input: number; cached: number; output: number } | undefined;
}

export class PriceTable {
  /** `provider/model` → that model's prices; null: no price. */
  readonly #resolved = new Map<string, ModelPrices | null>();
  readonly #instances: ReadonlyMap<string, PricedInstance>;
  /** Instance name → the package provider ids to try, in order. */
  readonly #candidates = new Map<string, string[]>();
  readonly #overrides: Readonly<Record<string, PriceOverride>>;
  readonly #onUnknown: (provider: string, model: string) => void;
  readonly #onUnknownLimit: (limit: number) => void;
  /** `provider/model` keys already reported as having no price (at most MAX_UNKNOWN_WARNINGS). */
  readonly #reported = new Set<string>();

  constructor(options: PriceTableOptions) {
    this.#instances = new Map(options.instances.map((i) => [i.name, i]));
    this.#overrides = options.overrides ?? {};
    this.#onUnknown = options.onUnknown ?? (() => {});
    this.#onUnknownLimit = options.onUnknownLimit ?? (() => {});
  }

  /** Dollars; 0 for a model without a price, a cache hit or a request without usage. */
  cost(usage: PricedUsage): number {
    const input = Math.max(0, usage.promptTokens);
    const output = Math.max(0, usage.completionTokens);
    if (input === 0 && output === 0) return 0;
    const prices = this.#pricesFor(usage.provider, usage.model);
    if (prices === null) return 0;
    // Cached tokens are part of the prompt; a provider reporting more would make the package throw.
    const cached = Math.min(Math.max(0, usage.cachedPromptTokens), input);
    const perToken = prices.perToken;
    if (perToken !== undefined) return (input - cached) * perToken.input + cached * perToken.cached + output * perToken.output;
    try {
      const result = calcPrice({ input_tokens: input, output_tokens: output, cache_read_tokens: cached }, usage.model, {
        provider: prices.provider,
        timestamp: new Date(usage.timestampMs),
      });
      return result?.total_price ?? 0;
    } catch {
      // Price data the package cannot apply to this usage: treated like a model without a price.
      this.#resolved.set(`${usage.provider}/${usage.model}`, null);
      this.#reportUnknown(usage.provider, usage.model);
      return 0;
    }
  }

  /** Models whose prices are remembered now (at most MAX_REMEMBERED_MODELS). */
  get size(): number {
    return this.#resolved.size;
  }

  #reportUnknown(provider: string, model: string): void {
    const key = `${provider}/${model}`;
    if (this.#reported.size >= MAX_UNKNOWN_WARNINGS || this.#reported.has(key)) return;
    this.#reported.add(key);
    this.#onUnknown(provider, model);
    if (this.#reported.size === MAX_UNKNOWN_WARNINGS) this.#onUnknownLimit(MAX_UNKNOWN_WARNINGS);
  }

  #pricesFor(provider: string, model: string): ModelPrices | null {
    const key = `${provider}/${model}`;
    let prices = this.#resolved.get(key);
    if (prices === undefined) {
      const found = this.#resolve(provider, model);
      prices = found === null ? null : { provider: found, perToken: perTokenOf(found, model) };
      if (this.#resolved.size >= MAX_REMEMBERED_MODELS) this.#resolved.delete(this.#resolved.keys().next().value!);
      this.#resolved.set(key, prices);
      // A request without a model (passthrough) or on a type without prices by design is not worth a log line.
      const instance = this.#instances.get(provider);
      if (prices === null && model !== '' && instance !== undefined && instance.pricesProvider !== null) this.#reportUnknown(provider, model);
    }
    return prices;
  }

  #resolve(provider: string, model: string): PriceProvider | null {
    if (model === '') return null;
    const override = this.#overrides[`${provider}/${model}`];
    if (override !== undefined) return overrideProvider(model, override);
    const instance = this.#instances.get(provider);
    if (instance === undefined || instance.pricesProvider === null) return null;
    for (const providerId of this.#candidatesOf(instance)) {
      const found = lookup(model, providerId);
      if (found !== null) return found;
    }
    return lookup(model, undefined);
  }

  #candidatesOf(instance: PricedInstance): string[] {
    let ids = this.#candidates.get(instance.name);
    if (ids === undefined) {
      ids = [];
      const byUrl = instance.baseUrl === undefined ? undefined : findProvider({ providerApiUrl: instance.baseUrl })?.id;
      if (byUrl !== undefined) ids.push(byUrl);
      const byType = instance.pricesProvider;
      if (byType !== undefined && byType !== null && byType !== byUrl) ids.push(byType);
      this.#candidates.set(instance.name, ids);
    }
    return ids;
  }
}

/**
 * The package's entry for `model` (under `providerId`, or wherever the package places the model
 * id), reduced to a provider with that one model: pricing a request then matches one model
 * instead of searching the whole table each time.
 */
function lookup(model: string, providerId: string | undefined): PriceProvider | null {
  const found = calcPrice({ input_tokens: 0 }, model, providerId === undefined ? {} : { providerId });
  if (found === null) return null;
  return { ...found.provider, models: [{ ...found.model, match: { equals: model } }] };
}

/**
 * Dollars per uncached prompt, cached prompt and completion token, when the model's prices are flat
 * (no date conditions, no tiers by volume): the cost is then linear in the tokens, and the package
 * itself, asked once per model for a million of each, gives the rates. Pricing runs for every
 * completed request, and the package's general computation (units, tiers, dates) is the costly
 * part of it. Undefined when the prices are not flat: each request then asks the package.
 */
function perTokenOf(provider: PriceProvider, model: string): ModelPrices['perToken'] {
  const prices = provider.models[0]?.prices;
  if (prices === undefined || Array.isArray(prices) || !Object.values(prices).every((v) => v === undefined || typeof v === 'number')) return undefined;
  const MTOK = 1_000_000;
  const priced = (usage: Record<string, number>): number | undefined => calcPrice(usage, model, { provider })?.total_price;
  try {
    const input = priced({ input_tokens: MTOK });
    const cached = priced({ input_tokens: MTOK, cache_read_tokens: MTOK });
    const output = priced({ output_tokens: MTOK });
    if (input === undefined || cached === undefined || output === undefined) return undefined;
    return { input: input / MTOK, cached: cached / MTOK, output: output / MTOK };
  } catch {
    return undefined;
  }
}

function overrideProvider(model: string, override: PriceOverride): PriceProvider {
  const prices: Record<string, number> = { input_mtok: override.inputPerMtok, output_mtok: override.outputPerMtok };
  if (override.cachedInputPerMtok !== undefined) prices.cache_read_mtok = override.cachedInputPerMtok;
  return { id: 'floodgate-pricing', name: 'Floodgate pricing override', api_pattern: '', models: [{ id: model, match: { equals: model }, prices }] };
}
