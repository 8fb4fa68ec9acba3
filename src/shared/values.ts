/**
 * Values that end up in stored usage records, cleaned where they enter: whatever a client or an
 * upstream sends, every database can hold the result (PostgreSQL text refuses NUL, its bigint
 * refuses fractions, SQLite's NOT NULL refuses a non-finite number).
 */

/**
 * The largest token count one request is recorded with. Far above any real request, and small
 * enough that millions of such records still sum exactly in a 64-bit integer.
 */
export const MAX_TOKEN_COUNT = 1e12;

/**
 * A token count as reported (by an upstream, a realtime event): a whole number from 0 to
 * MAX_TOKEN_COUNT, a fraction rounded up (a started token is spent), anything larger (a JSON
 * 1e400 reads as Infinity) capped; undefined for anything that is not a number.
 */
export function tokenCount(value: unknown): number | undefined {
  if (typeof value !== 'number' || Number.isNaN(value)) return undefined;
  if (value <= 0) return 0;
  return Math.min(MAX_TOKEN_COUNT, Math.ceil(value));
}

/** The sum of clean token counts, capped like each of them. */
export function sumCounts(...counts: readonly number[]): number {
  let sum = 0;
  for (const count of counts) sum += count;
  return Math.min(MAX_TOKEN_COUNT, sum);
}

/** NUL, and a surrogate without its pair: characters with no place in stored text. */
const UNSTORABLE = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;
/** Cheap first test: text without NUL or any surrogate (nearly all of it) is returned as it is. */
const SUSPECT = /[\u0000\uD800-\uDFFF]/;

/**
 * Text every database stores as it is: NUL and lone UTF-16 surrogates (which have no UTF-8 form)
 * become U+FFFD, the replacement character, so the rest of the text stays readable.
 */
export function storableText(value: string): string {
  return SUSPECT.test(value) ? value.replace(UNSTORABLE, '\ufffd') : value;
}
