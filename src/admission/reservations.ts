/**
 * The estimate a request reserves at admission when reservations are on (rate_limits.reservations,
 * budgets.reservations): its tokens (see src/tokens/reservation.ts) on the token windows, and
 * their cost at a target's prices on the budgets. Nothing is counted when both are off.
 */
import type { PriceTable } from '../pricing/price-table.ts';
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

  /** What a request to `model` with this JSON body reserves; undefined when reservations are off. */
  async estimate(endpoint: string, model: string, body: unknown): Promise<(ReservationEstimate & { readonly estimate: TokenEstimate }) | undefined> {
    if (!this.enabled) return undefined;
    const estimate = await estimateRequestTokens(model, endpoint, body, this.#settings.defaultCompletionTokens);
    const prices = this.#prices;
    const at = this.#now();
    const costUsd = this.#settings.budgets
      ? (target: PricedTarget): number => prices.cost({ provider: target.provider.name, model: target.model, promptTokens: estimate.promptTokens, completionTokens: estimate.completionTokens, cachedPromptTokens: 0, timestampMs: at })
      : undefined;
    return { tokens: this.#settings.tokens ? estimate.totalTokens : 0, costUsd, estimate };
  }
}
