import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MAX_DELAY_MS, parseDuration, parseHttpDate, parseRfc3339, readCapacity } from '../../src/providers/capacity.ts';
import { prng } from '../support/random.ts';

const NOW = Date.parse('2025-03-04T05:06:07.000Z');

describe('readCapacity: OpenAI-style headers', () => {
  it('reads both dimensions with their Go-style resets', () => {
    const capacity = readCapacity({
      'x-ratelimit-limit-requests': '500',
      'x-ratelimit-remaining-requests': '499',
      'x-ratelimit-reset-requests': '120ms',
      'x-ratelimit-limit-tokens': '30000',
      'x-ratelimit-remaining-tokens': '29950',
      'x-ratelimit-reset-tokens': '6m0s',
    }, 200, NOW);
    assert.deepEqual(capacity, {
      requests: { limit: 500, remaining: 499, resetInMs: 120 },
      tokens: { limit: 30_000, remaining: 29_950, resetInMs: 360_000 },
      throttled: false,
      retryAfterMs: undefined,
      malformed: [],
    });
  });

  it('takes what is there: Azure sends remaining counts only', () => {
    const capacity = readCapacity({ 'x-ratelimit-remaining-requests': '0', 'x-ratelimit-remaining-tokens': '120' }, 200, NOW);
    assert.deepEqual(capacity?.requests, { limit: undefined, remaining: 0, resetInMs: undefined });
    assert.deepEqual(capacity?.tokens, { limit: undefined, remaining: 120, resetInMs: undefined });
  });

  it('reads every duration form OpenAI-compatible servers send', () => {
    const cases: Array<[string, number]> = [
      ['1s', 1000], ['6m0s', 360_000], ['250ms', 250], ['1h2m3.5s', 3_723_500], ['2m59.56s', 179_560], ['17ms', 17],
      ['0s', 0], ['1.5', 1500], ['12', 12_000], ['500us', 0.5], ['1µs', 0.001], ['3ns', 0.000003], ['.5s', 500],
    ];
    for (const [text, ms] of cases) assert.ok(Math.abs(parseDuration(text)! - ms) < 1e-9, `${text} is ${ms} ms, not ${parseDuration(text)}`);
    for (const text of ['', 's', '1x', '-1s', '1s ', '1 s', '1m-2s', 'Infinitys', 'NaN', '1e3s', '1s2', '8d', `${MAX_DELAY_MS / 1000 + 1}s`]) {
      assert.equal(parseDuration(text), undefined, `"${text}" is no duration`);
    }
  });

  it('ignores a header it cannot read, and names it', () => {
    const capacity = readCapacity({ 'x-ratelimit-remaining-requests': '-1', 'x-ratelimit-remaining-tokens': '10', 'x-ratelimit-reset-tokens': 'soon' }, 200, NOW);
    assert.equal(capacity?.requests, undefined);
    assert.deepEqual(capacity?.tokens, { limit: undefined, remaining: 10, resetInMs: undefined });
    assert.deepEqual(capacity?.malformed, ['x-ratelimit-remaining-requests', 'x-ratelimit-reset-tokens']);
  });

  it('answers nothing for an answer without rate-limit headers', () => {
    assert.equal(readCapacity({ 'content-type': 'application/json' }, 200, NOW), undefined);
    assert.equal(readCapacity({}, 500, NOW), undefined);
    assert.equal(readCapacity({ 'retry-after': '5' }, 200, NOW), undefined, 'a retry-after counts on a 429 or 503 only');
  });
});

describe('readCapacity: Anthropic headers', () => {
  it('reads RFC 3339 resets, and the tightest of the token limits', () => {
    const capacity = readCapacity({
      'anthropic-ratelimit-requests-limit': '50',
      'anthropic-ratelimit-requests-remaining': '0',
      'anthropic-ratelimit-requests-reset': '2025-03-04T05:06:09Z',
      'anthropic-ratelimit-tokens-limit': '90000',
      'anthropic-ratelimit-tokens-remaining': '80000',
      'anthropic-ratelimit-tokens-reset': '2025-03-04T05:06:37Z',
      'anthropic-ratelimit-input-tokens-limit': '40000',
      'anthropic-ratelimit-input-tokens-remaining': '1000',
      'anthropic-ratelimit-input-tokens-reset': '2025-03-04T06:06:07.500+01:00',
      'anthropic-ratelimit-output-tokens-limit': '8000',
      'anthropic-ratelimit-output-tokens-remaining': '7000',
      'anthropic-ratelimit-output-tokens-reset': '2025-03-04T05:06:10Z',
    }, 200, NOW);
    assert.deepEqual(capacity?.requests, { limit: 50, remaining: 0, resetInMs: 2000 });
    assert.deepEqual(capacity?.tokens, { limit: 40_000, remaining: 1000, resetInMs: 500 }, 'the input-token limit runs out first');
    assert.deepEqual(capacity?.malformed, []);
  });

  it('reads a reset already passed as 0, and refuses impossible dates', () => {
    const passed = readCapacity({ 'anthropic-ratelimit-requests-remaining': '3', 'anthropic-ratelimit-requests-reset': '2025-03-04T05:00:00Z' }, 200, NOW);
    assert.deepEqual(passed?.requests, { limit: undefined, remaining: 3, resetInMs: 0 });
    for (const bad of ['2025-02-30T00:00:00Z', '2025-13-01T00:00:00Z', '2025-01-01T24:00:00Z', '2025-01-01T00:00:00', '2025-01-01', 'tomorrow', '2025-01-01T00:00:00+25:00']) {
      assert.equal(parseRfc3339(bad), undefined, bad);
      const capacity = readCapacity({ 'anthropic-ratelimit-requests-remaining': '0', 'anthropic-ratelimit-requests-reset': bad }, 200, NOW);
      assert.deepEqual(capacity?.malformed, ['anthropic-ratelimit-requests-reset']);
      assert.equal(capacity?.requests?.resetInMs, undefined);
    }
    assert.equal(parseRfc3339('2024-02-29T23:59:60Z'), Date.parse('2024-02-29T23:59:59Z'), 'a leap second reads as the last second');
    assert.equal(parseRfc3339('0099-01-01T00:00:00Z'), Date.parse('0099-01-01T00:00:00Z'));
  });
});

describe('readCapacity: refusals and retry-after', () => {
  it('reads a 429 with retry-after in seconds, retry-after-ms first', () => {
    assert.deepEqual(readCapacity({ 'retry-after': '2' }, 429, NOW), { requests: undefined, tokens: undefined, throttled: true, retryAfterMs: 2000, malformed: [] });
    assert.equal(readCapacity({ 'retry-after': '2', 'retry-after-ms': '1500.5' }, 429, NOW)?.retryAfterMs, 1500.5);
    assert.equal(readCapacity({ 'retry-after': '0.5' }, 429, NOW)?.retryAfterMs, 500);
  });

  it('reads a retry-after HTTP date in each of its three forms', () => {
    for (const date of ['Tue, 04 Mar 2025 05:06:10 GMT', 'Tuesday, 04-Mar-25 05:06:10 GMT', 'Tue Mar  4 05:06:10 2025']) {
      assert.equal(parseHttpDate(date, NOW), NOW + 3000, date);
      assert.equal(readCapacity({ 'retry-after': date }, 429, NOW)?.retryAfterMs, 3000, date);
    }
    assert.equal(readCapacity({ 'retry-after': 'Tue, 04 Mar 2025 05:00:00 GMT' }, 429, NOW)?.retryAfterMs, 0, 'a date passed means now');
    for (const bad of ['Tue, 31 Feb 2025 05:06:10 GMT', 'Tue, 04 Mar 2025 05:06:10 UTC', 'tomorrow', '04 Mar 2025', '-5', '1e3']) {
      const capacity = readCapacity({ 'retry-after': bad }, 429, NOW);
      assert.equal(capacity?.retryAfterMs, undefined, bad);
      assert.equal(capacity?.throttled, true, 'a 429 is a refusal whatever its retry-after');
      assert.deepEqual(capacity?.malformed, ['retry-after'], bad);
    }
  });

  it('counts a 503 as a refusal only when it says when to retry; a bare 429 still is one', () => {
    assert.equal(readCapacity({}, 503, NOW), undefined);
    assert.equal(readCapacity({ 'retry-after': '4' }, 503, NOW)?.throttled, true);
    assert.deepEqual(readCapacity({}, 429, NOW), { requests: undefined, tokens: undefined, throttled: true, retryAfterMs: undefined, malformed: [] });
  });

  it('refuses a wait beyond a week, and a repeated header', () => {
    assert.equal(readCapacity({ 'retry-after': String(8 * 86_400) }, 429, NOW)?.retryAfterMs, undefined);
    const repeated = readCapacity({ 'x-ratelimit-remaining-requests': ['1', '2'] }, 200, NOW);
    assert.deepEqual(repeated?.malformed, ['x-ratelimit-remaining-requests']);
  });
});

describe('readCapacity: any value at all', () => {
  const NAMES = [
    'x-ratelimit-limit-requests', 'x-ratelimit-remaining-requests', 'x-ratelimit-reset-requests', 'x-ratelimit-limit-tokens',
    'x-ratelimit-remaining-tokens', 'x-ratelimit-reset-tokens', 'anthropic-ratelimit-requests-remaining', 'anthropic-ratelimit-requests-reset',
    'anthropic-ratelimit-tokens-limit', 'anthropic-ratelimit-input-tokens-remaining', 'anthropic-ratelimit-output-tokens-reset', 'retry-after', 'retry-after-ms',
  ];
  const PIECES = ['0', '1', '9', '.', '-', '+', 'e', 's', 'm', 'h', 'ms', 'µ', ' ', 'T', 'Z', ':', ',', 'GMT', 'Mon', 'Jan', '2025', 'NaN', 'Infinity', '\u0000', '9999999999999999999', '\uFFFF'];

  it('never throws and answers only well-formed numbers, whatever the headers say', () => {
    const random = prng(37);
    const randomInt = (n: number): number => Math.floor(random() * n);
    for (let round = 0; round < 3000; round++) {
      const headers: Record<string, string | string[]> = {};
      for (const name of NAMES) {
        if (randomInt(3) !== 0) continue;
        let value = '';
        for (let i = randomInt(8); i > 0; i--) value += PIECES[randomInt(PIECES.length)];
        headers[name] = randomInt(20) === 0 ? [value, value] : value;
      }
      const status = [200, 400, 429, 503, 529][randomInt(5)]!;
      const capacity = readCapacity(headers, status, NOW);
      if (capacity === undefined) continue;
      for (const dimension of [capacity.requests, capacity.tokens]) {
        if (dimension === undefined) continue;
        assert.ok(Number.isSafeInteger(dimension.remaining) && dimension.remaining >= 0, JSON.stringify(headers));
        if (dimension.limit !== undefined) assert.ok(Number.isSafeInteger(dimension.limit) && dimension.limit >= 0);
        if (dimension.resetInMs !== undefined) assert.ok(dimension.resetInMs >= 0 && dimension.resetInMs <= MAX_DELAY_MS);
      }
      if (capacity.retryAfterMs !== undefined) assert.ok(capacity.retryAfterMs >= 0 && capacity.retryAfterMs <= MAX_DELAY_MS);
      assert.ok(capacity.malformed.every((name) => NAMES.includes(name)));
    }
  });
});
