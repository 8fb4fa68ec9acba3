import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isBudgetPeriod, parseBudgetPeriod, periodWindow } from '../../src/budgets/periods.ts';

const t = (iso: string): number => Date.parse(iso);
const windowOf = (period: string, iso: string): [string, string] => {
  const w = periodWindow(period, t(iso));
  return [new Date(w.startMs).toISOString(), new Date(w.endMs).toISOString()];
};

describe('budget periods', () => {
  it('day: the UTC calendar day', () => {
    assert.deepEqual(windowOf('day', '2025-03-10T23:59:59.999Z'), ['2025-03-10T00:00:00.000Z', '2025-03-11T00:00:00.000Z']);
    assert.deepEqual(windowOf('day', '2025-03-11T00:00:00.000Z'), ['2025-03-11T00:00:00.000Z', '2025-03-12T00:00:00.000Z']);
  });

  it('week: ISO weeks, Monday 00:00 UTC to the next Monday, across month and year ends', () => {
    // 2025-03-10 is a Monday.
    assert.deepEqual(windowOf('week', '2025-03-10T00:00:00.000Z'), ['2025-03-10T00:00:00.000Z', '2025-03-17T00:00:00.000Z']);
    assert.deepEqual(windowOf('week', '2025-03-16T23:59:59.999Z'), ['2025-03-10T00:00:00.000Z', '2025-03-17T00:00:00.000Z']);
    assert.deepEqual(windowOf('week', '2025-03-09T23:59:59.999Z'), ['2025-03-03T00:00:00.000Z', '2025-03-10T00:00:00.000Z']);
    // Thursday 1 January 2026 belongs to the week of Monday 29 December 2025.
    assert.deepEqual(windowOf('week', '2026-01-01T12:00:00.000Z'), ['2025-12-29T00:00:00.000Z', '2026-01-05T00:00:00.000Z']);
    // The epoch itself was a Thursday.
    assert.deepEqual(windowOf('week', '1970-01-01T00:00:00.000Z'), ['1969-12-29T00:00:00.000Z', '1970-01-05T00:00:00.000Z']);
  });

  it('month: the calendar month, whatever its length, leap years included', () => {
    assert.deepEqual(windowOf('month', '2025-01-31T23:59:59.999Z'), ['2025-01-01T00:00:00.000Z', '2025-02-01T00:00:00.000Z']);
    assert.deepEqual(windowOf('month', '2025-02-01T00:00:00.000Z'), ['2025-02-01T00:00:00.000Z', '2025-03-01T00:00:00.000Z']);
    assert.deepEqual(windowOf('month', '2024-02-29T08:00:00.000Z'), ['2024-02-01T00:00:00.000Z', '2024-03-01T00:00:00.000Z']);
    assert.deepEqual(windowOf('month', '2025-12-15T00:00:00.000Z'), ['2025-12-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z']);
  });

  it('custom: windows of n seconds aligned to the Unix epoch', () => {
    assert.deepEqual(windowOf('3600s', '2025-03-10T10:59:59.999Z'), ['2025-03-10T10:00:00.000Z', '2025-03-10T11:00:00.000Z']);
    assert.deepEqual(windowOf('7s', '1970-01-01T00:00:15.000Z'), ['1970-01-01T00:00:14.000Z', '1970-01-01T00:00:21.000Z']);
    // 604800 s windows start on Thursdays (the epoch's weekday), unlike `week`.
    assert.deepEqual(windowOf('604800s', '2025-03-10T00:00:00.000Z'), ['2025-03-06T00:00:00.000Z', '2025-03-13T00:00:00.000Z']);
  });

  it('parses a period name, a numeric name, or period_seconds, naming the field on errors', () => {
    assert.deepEqual(parseBudgetPeriod('Month', undefined), { ok: true, value: 'month' });
    assert.deepEqual(parseBudgetPeriod('3600', undefined), { ok: true, value: '3600s' });
    assert.deepEqual(parseBudgetPeriod(undefined, 86400), { ok: true, value: 'day' });
    assert.deepEqual(parseBudgetPeriod(undefined, 604800), { ok: true, value: '604800s' });
    assert.deepEqual(parseBudgetPeriod('minute', undefined, 'limit_key.'), { ok: false, error: 'limit_key.period must be one of day, week, month, or a number of seconds from 1 to 31622400' });
    assert.deepEqual(parseBudgetPeriod('day', 60, 'limit_key.'), { ok: false, error: 'limit_key.period: give either period or period_seconds, not both' });
    assert.deepEqual(parseBudgetPeriod(undefined, 0.5), { ok: false, error: 'period_seconds must be an integer from 1 to 31622400 (366 days)' });
    assert.deepEqual(parseBudgetPeriod(undefined, undefined, 'limit_key.'), { ok: false, error: 'limit_key.period: required (day, week, month) or limit_key.period_seconds' });
  });

  it('knows the labels it produces', () => {
    for (const label of ['day', 'week', 'month', '1s', '3600s', '31622400s']) assert.equal(isBudgetPeriod(label), true, label);
    for (const label of ['year', '0s', '86400s', '31622401s', '12', 's', '01s']) assert.equal(isBudgetPeriod(label), false, label);
  });
});
