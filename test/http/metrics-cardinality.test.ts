/**
 * No metric label takes a value from the caller: 100,000 distinct callers (99,000 user paths
 * given in the header, 1,000 managed keys bound to paths of their own), admitted and refused by
 * a per-child rule (its children full, so every new caller is refused with its own path in the
 * 429), leave `/metrics` with exactly the series it had after a few callers made the same kinds
 * of request. Node's and the process's own metrics are left out of the comparison: their series
 * (GC kinds, heap spaces) come and go with the runtime, not with the callers.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, describe, it } from 'node:test';
import { startTestGateway, type TestGateway } from '../support/gateway.ts';
import { scrape, type Scrape } from '../support/prometheus.ts';

const MASTER = 'sk-master-cardinality';
const CALLERS = 100_000;
const KEYS = 1_000;
const BODY = JSON.stringify({ model: 'mock-1', messages: [{ role: 'user', content: 'hi' }] });
const YAML = `
rate_limits:
  max_children: 500
  user_paths: [ { path: /t, limits: [ { period: minute, max_requests: 1, per_child: true } ] } ]
budgets:
  user_paths: [ { path: /t, limits: [ { period: day, max_usd: 1000 } ] } ]
`;

/** Every series but Node's and the process's, as `name{labels}`. */
function seriesOf(m: Scrape): string[] {
  const names = [...m.text.matchAll(/^(floodgate_\w+?)(?:\{(.*)\})? \S+$/gm)].map(([, name, labels]) => `${name}{${labels ?? ''}}`);
  return names.filter((s) => !s.startsWith('floodgate_process_') && !s.startsWith('floodgate_nodejs_')).sort();
}

describe('metrics cardinality: 100,000 distinct callers', { timeout: 600_000 }, () => {
  let gw: TestGateway;
  let agent: http.Agent;
  const auth = { authorization: `Bearer ${MASTER}` };

  before(async () => {
    gw = await startTestGateway({ yaml: YAML, env: { MASTER_KEY: MASTER } });
    agent = new http.Agent({ keepAlive: true, maxSockets: 16 });
  });
  after(async () => {
    agent?.destroy();
    await gw?.close();
  });

  /** A chat over a keep-alive connection: the status. */
  const chat = (headers: Record<string, string>): Promise<number> => {
    const url = new URL(gw.url);
    return new Promise((resolve, reject) => {
      const req = http.request(
        { agent, host: url.hostname, port: url.port, method: 'POST', path: '/v1/chat/completions', headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(BODY), ...headers } },
        (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        },
      );
      req.on('error', reject);
      req.end(BODY);
    });
  };

  it('leaves the series as a few callers left them', async () => {
    const keys: string[] = [];
    for (let i = 0; i < KEYS; i++) {
      const res = await gw.request('POST', '/admin/api-keys', { body: { name: `k${i}`, user_path: `/t/key-${i}` }, headers: auth });
      assert.equal(res.status, 201, res.text);
      keys.push(res.json().key as string);
    }
    // A few callers make every kind of request the many will: served and refused, by path and by key.
    assert.equal(await chat({ ...auth, 'x-floodgate-user-path': '/t/warm' }), 200);
    assert.equal(await chat({ ...auth, 'x-floodgate-user-path': '/t/warm' }), 429);
    assert.equal(await chat({ authorization: `Bearer ${keys[0]!}` }), 200);
    assert.equal(await chat({ authorization: `Bearer ${keys[0]!}` }), 429);
    // A scrape is a request too: the first one makes the series of its own timings.
    await scrape(gw, auth);
    const before = seriesOf(await scrape(gw, auth));

    const statuses = new Map<number, number>();
    let next = 1;
    const started = performance.now();
    await Promise.all(Array.from({ length: 16 }, async () => {
      while (next < CALLERS) {
        const i = next++;
        const headers = i < KEYS ? { authorization: `Bearer ${keys[i]!}` } : { ...auth, 'x-floodgate-user-path': `/t/caller-${i}` };
        const status = await chat(headers);
        statuses.set(status, (statuses.get(status) ?? 0) + 1);
      }
    }));
    const seconds = (performance.now() - started) / 1000;
    assert.equal((statuses.get(200) ?? 0) + (statuses.get(429) ?? 0), CALLERS - 1, JSON.stringify([...statuses]));
    assert.ok((statuses.get(429) ?? 0) > CALLERS / 2, 'most were refused: the rule counts 500 children at most');

    const m = await scrape(gw, auth);
    const after = seriesOf(m);
    assert.deepEqual(after, before, 'the same series, whoever called');
    for (const value of m.labelValues()) assert.ok(!/\/t\/(caller|key)-/.test(value), `a caller's path in a label: ${value}`);
    assert.equal(m.value('floodgate_rate_limit_refusals_total', { scope: 'user_path', subject: '/t', period: 'minute' }), (statuses.get(429) ?? 0) + 2);
    process.stdout.write(`# ${CALLERS} distinct callers in ${seconds.toFixed(1)} s: ${before.length} series before, ${after.length} after (Node's and the process's left out)\n`);
  });
});
