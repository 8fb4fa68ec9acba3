/** TallyCounter and TallyHistogram: series kept as plain numbers and exposed through prom-client at scrape time. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Histogram, Registry } from 'prom-client';
import { TallyCounter, TallyHistogram } from '../../src/metrics/tally.ts';
import { Scrape } from '../support/prometheus.ts';

describe('TallyCounter', () => {
  it('exposes a series at 0 from its creation, then what was counted, the same on every scrape', async () => {
    const registry = new Registry();
    const counter = new TallyCounter({ name: 'test_events_total', help: 'Events.', labelNames: ['kind'] as const, registers: [registry] });
    const seen = counter.series({ kind: 'seen' });
    counter.series({ kind: 'never' });

    let m = new Scrape(await registry.metrics());
    assert.equal(m.value('test_events_total', { kind: 'seen' }), 0);
    assert.equal(m.value('test_events_total', { kind: 'never' }), 0);

    seen.inc();
    seen.inc(4);
    m = new Scrape(await registry.metrics());
    assert.equal(m.value('test_events_total', { kind: 'seen' }), 5);
    // A second scrape reads the same totals, not twice them.
    m = new Scrape(await registry.metrics());
    assert.equal(m.value('test_events_total', { kind: 'seen' }), 5);
    assert.equal(m.value('test_events_total', { kind: 'never' }), 0);
    assert.match(await registry.metrics(), /# TYPE test_events_total counter/);
  });
});

describe('TallyHistogram', () => {
  const buckets = [0.01, 0.1, 1];
  const observed = [0.005, 0.01, 0.05, 0.1, 0.5, 2, 30];

  it('exposes what prom-client\'s own histogram exposes for the same observations, text and JSON', async () => {
    const own = new Registry();
    const reference = new Histogram({ name: 'test_seconds', help: 'Durations.', labelNames: ['route'] as const, buckets, registers: [own] });
    const registry = new Registry();
    const histogram = new TallyHistogram({ name: 'test_seconds', help: 'Durations.', labelNames: ['route'] as const, buckets, registers: [registry] });
    const a = histogram.series({ route: '/a' });
    const b = histogram.series({ route: '/b' });
    for (const value of observed) {
      a.observe(value);
      reference.labels('/a').observe(value);
    }
    b.observe(0.2);
    reference.labels('/b').observe(0.2);

    assert.equal(await registry.metrics(), await own.metrics());
    // prom-client's own values also carry an empty exemplar each.
    const withoutExemplars = (metrics: Awaited<ReturnType<Registry['getMetricsAsJSON']>>): unknown =>
      metrics.map((metric) => ({ ...metric, values: metric.values.map((value) => ({ ...value, exemplar: undefined })) }));
    assert.deepEqual(withoutExemplars(await registry.getMetricsAsJSON()), withoutExemplars(await own.getMetricsAsJSON()));
    const m = new Scrape(await registry.metrics());
    assert.equal(m.value('test_seconds_bucket', { route: '/a', le: '0.01' }), 2);
    assert.equal(m.value('test_seconds_bucket', { route: '/a', le: '+Inf' }), 7);
    assert.equal(m.value('test_seconds_count', { route: '/b' }), 1);
  });

  it('shows a series from its first observation on, and leaves out what is not a number', async () => {
    const registry = new Registry();
    const histogram = new TallyHistogram({ name: 'test_seconds', help: 'Durations.', labelNames: ['route'] as const, buckets, registers: [registry] });
    const a = histogram.series({ route: '/a' });
    assert.equal(new Scrape(await registry.metrics()).samples('test_seconds_count').length, 0);
    a.observe(Number.NaN);
    a.observe(0.5);
    const m = new Scrape(await registry.metrics());
    assert.equal(m.value('test_seconds_count', { route: '/a' }), 1);
    assert.equal(m.value('test_seconds_sum', { route: '/a' }), 0.5);
  });
});
