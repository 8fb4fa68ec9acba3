/** TallyCounter: series kept as plain numbers and exposed through prom-client at scrape time. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { TallyCounter } from '../../src/metrics/tally.ts';
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
