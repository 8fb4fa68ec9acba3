/**
 * The estimate a request reserves at admission when reservations are on (rate_limits.reservations,
 * budgets.reservations): its tokens (see src/tokens/reservation.ts) on the token windows, and
 * their cost at a target's prices on the budgets. Nothing is counted when both are off.
 */
import type { PriceTable } from '../pricing/price-table.ts';
import { loadDefaultEncoding } from '../tokens/count.ts';
import { estimateRequestTokens, type TokenEstimate } from '../tokens/reservation.ts';
import type { PricedTarget, ReservationEstimate } from './core.ts';

export interface ReservationSettings {
  /** rate_limits.reservations.enabled */
  readonly tokens: boolean;
  /** budgets.reservations.enabled */
  readonly budgets: boolean;
  /** rate_limits.reservations.default_completion_tokens */
  readonly defaultCompletionTokens: number;
}

/** What a request reserves, with the token estimate it was priced from. */
export type Reserved = ReservationEstimate & { readonly estimate: TokenEstimate };

export class ReservationEstimator {
  readonly #settings: ReservationSettings;
  readonly #prices: PriceTable;
  readonly #now: () => number;

  constructor(settings: ReservationSettings, prices: PriceTable, now: () => number) {
    this.#settings = settings;
    this.#prices = prices;
    this.#now = now;
  }

  /** Whether any reservation is on. */
  get enabled(): boolean {
    return this.#settings.tokens || this.#settings.budgets;
  }

  /** Loads what counting needs (see loadDefaultEncoding) when reservations are on, so that the first request does not wait for it. */
  async ready(): Promise<void> {
    if (this.enabled) await loadDefaultEncoding();
  }

  /**
   * What a request to `model` with this JSON body reserves; undefined when reservations are off.
   * At once when the model's encoding is loaded (the usual case after ready()), else once it is.
   */
  estimate(endpoint: string, model: string, body: unknown): Reserved | undefined | Promise<Reserved> {
    if (!this.enabled) return undefined;
    const estimate = estimateRequestTokens(model, endpoint, body, this.#settings.defaultCompletionTokens);
    return estimate instanceof Promise ? estimate.then((counted) => this.#reserved(counted)) : this.#reserved(estimate);
  }

  #reserved(estimate: TokenEstimate): Reserved {
    const tokens = this.#settings.tokens ? estimate.totalTokens : 0;
    if (!this.#settings.budgets) return { tokens, costUsd: undefined, estimate };
    const prices = this.#prices;
    const at = this.#now();
    const costUsd = (target: PricedTarget): number => prices.cost({ provider: target.provider.name, model: target.model, promptTokens: estimate.promptTokens, completionTokens: estimate.completionTokens, cachedPromptTokens: 0, timestampMs: at });
    return { tokens, costUsd, estimate };
  }
}
