/**
 * US-dollar amounts. Costs are sums of many small binary floats (0.1 + 0.2 is not 0.3), so every
 * amount shown or compared against a cap is rounded to a billionth of a dollar first: far below
 * any price step, far above the float noise.
 */

const NANO = 1e9;

export function roundUsd(amount: number): number {
  return Math.round(amount * NANO) / NANO;
}

/** `$10.00`, `$0.01`; amounts with finer digits keep them (`$0.005`). */
export function formatUsd(amount: number): string {
  const cents = amount.toFixed(2);
  if (Number(cents) === amount) return `$${cents}`;
  return `$${roundUsd(amount).toFixed(9).replace(/0+$/, '')}`;
}

/**
 * The highest price accepted per million tokens: ten dollars a token, tens of thousands of times
 * today's dearest models. With at most 1e12 tokens a request (src/shared/values.ts) a cost stays
 * a finite number (then held to the largest budget, src/usage/clean.ts).
 */
export const MAX_PRICE_PER_MTOK = 10_000_000;
