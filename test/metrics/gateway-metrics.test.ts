/**
 * The metrics module on its own: what an upstream call without an answer counts, how model
 * labels stay bounded, and a scrape whose rule statuses cannot be read.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { GatewayMetrics, NO_UPSTREAM_ANSWER, OTHER_MODEL } from '../../src/metrics/index.ts';
import { Scrape } from '../support/prometheus.ts';

const models = [
  { id: 'up/gpt-x', ownedBy: 'up' },
  { id: 'fast', ownedBy: 'floodgate' },
];

async function read(metrics: GatewayMetrics): Promise<Scrape> {
  return new Scrape(await metrics.exposition());
}

describe('GatewayMetrics', () => {
  it('an upstream call that throws is timed and counted under status "error", and the error goes on', async () => {
    let clock = 1_000;
    const metrics = new GatewayMetrics({ models, clock: () => clock });
    const failure = new Error('connection refused');
    await assert.rejects(
      metrics.upstream('up', async () => {
        clock += 2_500;
        throw failure;
      }),
      (err) => err === failure,
    );
    const answered = await metrics.upstream('up', async () => {
      clock += 300;
      return { status: 503 };
    });
    assert.equal(answered.status, 503);
    const m = await read(metrics);
    assert.equal(m.value('floodgate_upstream_responses_total', { provider: 'up', status: NO_UPSTREAM_ANSWER }), 1);
    assert.equal(m.value('floodgate_upstream_responses_total', { provider: 'up', status: '503' }), 1);
    assert.equal(m.value('floodgate_upstream_duration_seconds_count', { provider: 'up' }), 2);
    assert.equal(m.value('floodgate_upstream_duration_seconds_sum', { provider: 'up' }), 2.8);
    assert.equal(m.value('floodgate_upstream_duration_seconds_bucket', { provider: 'up', le: '0.25' }), 0);
    assert.equal(m.value('floodgate_upstream_duration_seconds_bucket', { provider: 'up', le: '0.5' }), 1);
    assert.equal(m.value('floodgate_upstream_duration_seconds_bucket', { provider: 'up', le: '5' }), 2);
  });

  it('tokens carry a listed model as is, any other model (an alias name included) as "other"', async () => {
    const metrics = new GatewayMetrics({ models });
    metrics.tokens('up', 'gpt-x', { promptTokens: 5, completionTokens: 7, totalTokens: 12 });
    metrics.tokens('up', 'not-listed', { promptTokens: 1, completionTokens: 2, totalTokens: 3 });
    metrics.tokens('up', 'fast', { promptTokens: 10, completionTokens: 20, totalTokens: 30 });
    metrics.tokens('up', 'gpt-x', undefined);
    const m = await read(metrics);
    assert.equal(m.value('floodgate_tokens_total', { provider: 'up', model: 'gpt-x', kind: 'prompt' }), 5);
    assert.equal(m.value('floodgate_tokens_total', { provider: 'up', model: 'gpt-x', kind: 'completion' }), 7);
    assert.equal(m.value('floodgate_tokens_total', { provider: 'up', model: OTHER_MODEL, kind: 'prompt' }), 11);
    assert.equal(m.value('floodgate_tokens_total', { provider: 'up', model: OTHER_MODEL, kind: 'completion' }), 22);
    assert.equal(m.samples('floodgate_tokens_total').length, 4);
  });

  it('a scrape whose rule statuses fail still answers, without rule gauges, and reports the error', async () => {
    const errors: unknown[] = [];
    let fail = false;
    const rules = {
      status: async () => {
        if (fail) throw new Error('counters unreachable');
        return [{
          scope: 'provider' as const, subject: 'up', user_path: '', source: 'config' as const, period_label: 'concurrent', period_seconds: 0,
          max_requests: 3, requests_used: 1, requests_remaining: 2, tokens_used: 0, in_flight: 1, created_at: '', updated_at: '',
        }];
      },
    };
    const metrics = new GatewayMetrics({ models, rules, onRuleStatusError: (err) => errors.push(err) });
    metrics.responded('/v1/models', 200);
    const before = await read(metrics);
    assert.equal(before.value('floodgate_rate_limit_in_flight', { scope: 'provider', subject: 'up' }), 1);
    assert.equal(before.value('floodgate_rate_limit_remaining', { scope: 'provider', subject: 'up', period: 'concurrent', kind: 'requests' }), 2);
    fail = true;
    const after = await read(metrics);
    assert.equal(errors.length, 1);
    assert.deepEqual(after.samples('floodgate_rate_limit_in_flight'), []);
    assert.deepEqual(after.samples('floodgate_rate_limit_remaining'), []);
    assert.equal(after.value('floodgate_requests_total', { endpoint: '/v1/models', status: '200' }), 1);
  });

  it('two gateways in one process keep separate counts', async () => {
    const a = new GatewayMetrics({ models });
    const b = new GatewayMetrics({ models });
    a.responded(undefined, 404);
    a.responded(undefined, 404);
    b.responded(undefined, 404);
    assert.equal((await read(a)).value('floodgate_requests_total', { endpoint: 'unmatched', status: '404' }), 2);
    assert.equal((await read(b)).value('floodgate_requests_total', { endpoint: 'unmatched', status: '404' }), 1);
  });
});
