/**
 * Reads what an upstream answer says about the provider's rate limits, whatever the provider type:
 *
 * - OpenAI-style (OpenAI, Azure OpenAI, most OpenAI-compatible servers):
 *   `x-ratelimit-{limit,remaining,reset}-{requests,tokens}`, resets as Go-style durations
 *   (`1s`, `6m0s`, `250ms`, `1h2m3.5s`) or plain seconds;
 * - Anthropic: `anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,remaining,reset}`,
 *   resets as RFC 3339 times; the token dimension is the tightest of the three token limits;
 * - on a 429 or 503: `retry-after-ms` (milliseconds), else `retry-after` (seconds, or an HTTP date
 *   in any of the three forms HTTP allows). Google's `retryDelay` arrives here as these headers.
 *
 * Parsing is strict and total: a value that is not exactly one of these forms (or is out of
 * bounds) is left out and its header named in `malformed`; nothing here throws.
 */
import type { Capacity, CapacityDimension } from '../shared/capacity.ts';
import type { ProviderResult } from './types.ts';

export type { Capacity, CapacityDimension } from '../shared/capacity.ts';

/** Headers as an upstream answer or a result carries them (lower-case names). */
export type AnswerHeaders = Readonly<Record<string, string | readonly string[] | undefined>>;

/** The longest wait or reset taken from an answer: a week (daily quotas reset within a day). */
export const MAX_DELAY_MS = 7 * 86_400_000;

/** Anthropic's token limits, each a dimension of its own upstream; the tightest stands for all. */
const ANTHROPIC_TOKEN_KINDS = ['tokens', 'input-tokens', 'output-tokens'] as const;

/**
 * The capacity an answer reports, or undefined when it reports nothing (no rate-limit header, and
 * not a refusal). `nowMs` is the clock absolute times (Anthropic's resets, an HTTP-date
 * `retry-after`) are measured against.
 */
export function readCapacity(headers: AnswerHeaders, status: number, nowMs: number = Date.now()): Capacity | undefined {
  // Most answers of most upstreams say nothing: found out with a few lookups, nothing built.
  if (status !== 429 && status !== 503 && !reportsRemaining(headers)) return undefined;
  const bad: string[] = [];
  let requests = openaiDimension(headers, 'requests', bad);
  let tokens = openaiDimension(headers, 'tokens', bad);
  if (reportsAnthropic(headers)) {
    requests = tighter(requests, anthropicDimension(headers, 'requests', nowMs, bad));
    for (const kind of ANTHROPIC_TOKEN_KINDS) tokens = tighter(tokens, anthropicDimension(headers, kind, nowMs, bad));
  }
  const refusal = status === 429 || status === 503;
  const retryAfterMs = refusal ? retryAfter(headers, nowMs, bad) : undefined;
  const throttled = status === 429 || (status === 503 && retryAfterMs !== undefined);
  if (requests === undefined && tokens === undefined && !throttled && bad.length === 0) return undefined;
  return { requests, tokens, throttled, retryAfterMs, malformed: bad };
}

/**
 * `result` with `capacity`, what its upstream answer reported (see readCapacity: read from the
 * answer's own headers, not from the ones passed on).
 */
export function withCapacity<T extends ProviderResult>(result: T, capacity: Capacity | undefined): T {
  if (capacity !== undefined) result.capacity = capacity;
  return result;
}

/** The capacity of a refusal that says nothing but its status (Bedrock's ThrottlingException). */
export function refusalCapacity(status: number): Capacity | undefined {
  return status === 429 ? { requests: undefined, tokens: undefined, throttled: true, retryAfterMs: undefined, malformed: [] } : undefined;
}

/** Whether an answer reports what remains of any limit (a limit or reset alone says nothing to act on). */
function reportsRemaining(headers: AnswerHeaders): boolean {
  return headers['x-ratelimit-remaining-requests'] !== undefined || headers['x-ratelimit-remaining-tokens'] !== undefined || reportsAnthropic(headers);
}

function reportsAnthropic(headers: AnswerHeaders): boolean {
  return headers['anthropic-ratelimit-requests-remaining'] !== undefined || headers['anthropic-ratelimit-tokens-remaining'] !== undefined
    || headers['anthropic-ratelimit-input-tokens-remaining'] !== undefined || headers['anthropic-ratelimit-output-tokens-remaining'] !== undefined;
}

const OPENAI_NAMES = {
  requests: { remaining: 'x-ratelimit-remaining-requests', limit: 'x-ratelimit-limit-requests', reset: 'x-ratelimit-reset-requests' },
  tokens: { remaining: 'x-ratelimit-remaining-tokens', limit: 'x-ratelimit-limit-tokens', reset: 'x-ratelimit-reset-tokens' },
} as const;

function openaiDimension(headers: AnswerHeaders, kind: 'requests' | 'tokens', bad: string[]): CapacityDimension | undefined {
  const names = OPENAI_NAMES[kind];
  const remaining = header(headers, names.remaining, parseCount, bad);
  const limit = header(headers, names.limit, parseCount, bad);
  const resetInMs = header(headers, names.reset, parseDuration, bad);
  return remaining === undefined ? undefined : { limit, remaining, resetInMs };
}

function anthropicDimension(headers: AnswerHeaders, kind: 'requests' | (typeof ANTHROPIC_TOKEN_KINDS)[number], nowMs: number, bad: string[]): CapacityDimension | undefined {
  const prefix = `anthropic-ratelimit-${kind}`;
  const remaining = header(headers, `${prefix}-remaining`, parseCount, bad);
  const limit = header(headers, `${prefix}-limit`, parseCount, bad);
  const resetAt = header(headers, `${prefix}-reset`, parseRfc3339, bad);
  if (remaining === undefined) return undefined;
  return { limit, remaining, resetInMs: resetAt === undefined ? undefined : delayUntil(resetAt, nowMs, `${prefix}-reset`, bad) };
}

/** Of two reports of one dimension, the one that runs out first: the least remaining, then the latest reset. */
function tighter(a: CapacityDimension | undefined, b: CapacityDimension | undefined): CapacityDimension | undefined {
  if (a === undefined) return b;
  if (b === undefined) return a;
  if (a.remaining !== b.remaining) return a.remaining < b.remaining ? a : b;
  return (b.resetInMs ?? -1) > (a.resetInMs ?? -1) ? b : a;
}

/** `retry-after-ms` when it is readable, else `retry-after`. */
function retryAfter(headers: AnswerHeaders, nowMs: number, bad: string[]): number | undefined {
  const ms = header(headers, 'retry-after-ms', parseMilliseconds, bad);
  if (ms !== undefined) return ms;
  const seconds = header(headers, 'retry-after', parseSeconds, [], true);
  if (seconds !== undefined) return seconds;
  const date = header(headers, 'retry-after', (text) => parseHttpDate(text, nowMs), bad);
  return date === undefined ? undefined : delayUntil(date, nowMs, 'retry-after', bad);
}

/**
 * One header's value through `parse`. Absent: undefined. A repeated header (several values) or a
 * value `parse` refuses: undefined, and the name goes to `bad` (unless `quiet`: another reading follows).
 */
function header<T>(headers: AnswerHeaders, name: string, parse: (text: string) => T | undefined, bad: string[], quiet = false): T | undefined {
  const raw = headers[name];
  if (raw === undefined) return undefined;
  const parsed = typeof raw === 'string' ? parse(raw.trim()) : undefined;
  if (parsed === undefined && !quiet) bad.push(name);
  return parsed;
}

/** Milliseconds from now until `atMs` (0 once passed); a time beyond MAX_DELAY_MS is refused. */
function delayUntil(atMs: number, nowMs: number, name: string, bad: string[]): number | undefined {
  const delay = Math.max(0, atMs - nowMs);
  if (delay <= MAX_DELAY_MS) return delay;
  bad.push(name);
  return undefined;
}

/** A non-negative integer written in decimal digits only. */
export function parseCount(text: string): number | undefined {
  if (!/^\d{1,16}$/.test(text)) return undefined;
  const value = Number(text);
  return Number.isSafeInteger(value) ? value : undefined;
}

const DECIMAL = /^(?:\d{1,15}(?:\.\d{1,9})?|\.\d{1,9})$/;

/** A non-negative decimal number of milliseconds (`retry-after-ms`), at most MAX_DELAY_MS. */
export function parseMilliseconds(text: string): number | undefined {
  if (!DECIMAL.test(text)) return undefined;
  return bounded(Number(text));
}

/** A non-negative decimal number of seconds (`retry-after` as delay-seconds), in milliseconds. */
export function parseSeconds(text: string): number | undefined {
  if (!DECIMAL.test(text)) return undefined;
  return bounded(Number(text) * 1000);
}

const DURATION_PART = /(\d{1,15}(?:\.\d{0,9})?|\.\d{1,9})(ns|us|µs|μs|ms|h|m|s)/y;
const UNIT_MS: Readonly<Record<string, number>> = { ns: 1e-6, us: 1e-3, 'µs': 1e-3, 'μs': 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** A Go-style duration (`1s`, `6m0s`, `250ms`, `1h2m3.5s`), or plain seconds, in milliseconds. */
export function parseDuration(text: string): number | undefined {
  if (DECIMAL.test(text)) return parseSeconds(text);
  if (text.length === 0 || text.length > 64) return undefined;
  DURATION_PART.lastIndex = 0;
  let total = 0;
  while (DURATION_PART.lastIndex < text.length) {
    const part = DURATION_PART.exec(text);
    if (part === null) return undefined;
    total += Number(part[1]) * UNIT_MS[part[2]!]!;
  }
  return bounded(total);
}

function bounded(ms: number): number | undefined {
  return Number.isFinite(ms) && ms >= 0 && ms <= MAX_DELAY_MS ? ms : undefined;
}

const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?(?:([Zz])|([+-])(\d{2}):(\d{2}))$/;

/** An RFC 3339 date-time (`2025-01-02T03:04:05Z`, `...05.5+01:00`), as epoch milliseconds. */
export function parseRfc3339(text: string): number | undefined {
  const m = RFC3339.exec(text);
  if (m === null) return undefined;
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  const at = utc(year, month, day, hour, minute, second);
  if (at === undefined) return undefined;
  const fraction = m[7] === undefined ? 0 : Math.floor(Number(m[7]) * 1000);
  if (m[8] !== undefined) return at + fraction;
  const offsetHours = Number(m[10]);
  const offsetMinutes = Number(m[11]);
  if (offsetHours > 23 || offsetMinutes > 59) return undefined;
  const offset = (offsetHours * 60 + offsetMinutes) * 60_000 * (m[9] === '-' ? -1 : 1);
  return at + fraction - offset;
}

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
const MONTH = `(${MONTHS.join('|')})`;
const IMF_FIXDATE = new RegExp(`^(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), (\\d{2}) ${MONTH} (\\d{4}) (\\d{2}):(\\d{2}):(\\d{2}) GMT$`);
const RFC850 = new RegExp(`^(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday), (\\d{2})-${MONTH}-(\\d{2}) (\\d{2}):(\\d{2}):(\\d{2}) GMT$`);
const ASCTIME = new RegExp(`^(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) ${MONTH} ( \\d|\\d{2}) (\\d{2}):(\\d{2}):(\\d{2}) (\\d{4})$`);

/**
 * An HTTP date (RFC 9110 §5.6.7): IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), or one of the
 * two obsolete forms a recipient must still accept (RFC 850, asctime), as epoch milliseconds.
 */
export function parseHttpDate(text: string, nowMs: number = Date.now()): number | undefined {
  let m = IMF_FIXDATE.exec(text);
  if (m !== null) return utc(Number(m[3]), monthOf(m[2]!), Number(m[1]), Number(m[4]), Number(m[5]), Number(m[6]));
  m = RFC850.exec(text);
  if (m !== null) {
    // A two-digit year more than 50 years ahead is the most recent past year with those digits.
    const thisYear = new Date(nowMs).getUTCFullYear();
    let year = Math.floor(thisYear / 100) * 100 + Number(m[3]);
    if (year > thisYear + 50) year -= 100;
    else if (year < thisYear - 50) year += 100;
    return utc(year, monthOf(m[2]!), Number(m[1]), Number(m[4]), Number(m[5]), Number(m[6]));
  }
  m = ASCTIME.exec(text);
  if (m !== null) return utc(Number(m[6]), monthOf(m[1]!), Number(m[2]!.trim()), Number(m[3]), Number(m[4]), Number(m[5]));
  return undefined;
}

function monthOf(name: string): number {
  return MONTHS.indexOf(name) + 1;
}

/** Epoch milliseconds of a UTC date and time, or undefined when a field is out of its range. */
function utc(year: number, month: number, day: number, hour: number, minute: number, second: number): number | undefined {
  if (month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 || second > 60) return undefined;
  // setUTCFullYear, not Date.UTC, which reads the years 0 to 99 as 1900 to 1999.
  const date = new Date(0);
  date.setUTCFullYear(year, month, 0);
  if (day > date.getUTCDate()) return undefined;
  date.setUTCFullYear(year, month - 1, day);
  // A leap second reads as the last second of its minute.
  date.setUTCHours(hour, minute, Math.min(second, 59), 0);
  return date.getTime();
}
