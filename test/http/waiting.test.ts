/**
 * End-to-end: requests that wait for capacity instead of a 429 at once (X-Floodgate-Max-Wait,
 * X-Floodgate-Priority, rate_limits.queue), on a real gateway in front of a fake upstream.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startFakeUpstream, type FakeUpstream } from '../support/fake-upstream.ts';
import { startTestGateway, type TestGateway, type TestResponse } from '../support/gateway.ts';
import { admin, assertRateLimited, chat, chatAs, eventually, heldRequest, MASTER, sleep, upProvider } from '../support/rate-limits.ts';

const WAIT = 'x-floodgate-max-wait';
const PRIORITY = 'x-floodgate-priority';
const WAITED = 'x-floodgate-queue-wait-ms';

function waitingChat(gw: TestGateway, userPath: string, wait: string, priority?: string, key = MASTER): Promise<TestResponse> {
  return chatAs(gw, userPath, chat(), { authorization: `Bearer ${key}`, [WAIT]: wait, ...(priority === undefined ? {} : { [PRIORITY]: priority }) });
}

describe('waiting for capacity, end to end', () => {
  let up: FakeUpstream;
  before(async () => {
    up = await startFakeUpstream({ name: 'up' });
  });
  after(async () => {
    await up.close();
  });

  describe('on a concurrency cap of 1 with a slow upstream', () => {
    let gw: TestGateway;
    before(async () => {
      gw = await startTestGateway({
        yaml: `${upProvider(up.url)}server: { master_key: ${MASTER} }\nrate_limits:\n  providers: [ { name: up, limits: [ { period: concurrent, max_requests: 1 } ] } ]\n`,
      });
    });
    after(async () => {
      up.setLatency(0);
      await gw.close();
    });

    it('serves a request that may wait 3 s once the slot frees (about 1 s), saying how long it waited', async () => {
      up.setLatency(1000);
      const first = waitingChat(gw, '/a', '0');
      await sleep(100);
      const started = Date.now();
      const second = await waitingChat(gw, '/b', '3');
      const took = Date.now() - started;
      assert.equal((await first).status, 200);
      assert.equal(second.status, 200, second.text);
      const waited = Number(second.headers.get(WAITED));
      assert.ok(waited >= 700 && waited <= 2500, `waited ${waited} ms for a slot held about 900 ms more`);
      assert.ok(took >= waited, 'then it was served');
    });

    it('answers a request that may wait 0.2 s its 429 at once (the refusal\'s wait is 1 s)', async () => {
      up.setLatency(1000);
      const first = waitingChat(gw, '/a', '0');
      await sleep(100);
      const started = Date.now();
      const second = await waitingChat(gw, '/b', '0.2');
      assert.ok(Date.now() - started < 500, 'at once');
      assertRateLimited(second, 'rate limit exceeded for provider up: concurrent request limit of 1 reached');
      assert.equal(second.headers.get(WAITED), null);
      await first;
    });

    it('refuses a malformed wait or priority with a 400 naming the header', async () => {
      for (const [header, value] of [[WAIT, '-1'], [WAIT, '1.2345'], [WAIT, 'soon'], [PRIORITY, 'urgent']] as const) {
        const res = await chatAs(gw, '/a', chat(), { authorization: `Bearer ${MASTER}`, [header]: value });
        assert.equal(res.status, 400, `${header}: ${value}`);
        assert.equal(res.json().error.param, header);
        assert.match(res.json().error.message, new RegExp(`^${header}: `));
      }
    });

    it('serves the higher priority first when the slot frees', async () => {
      up.setLatency(0);
      const held = await heldRequest(gw, up, '/hold');
      const order: string[] = [];
      const low = waitingChat(gw, '/low', '10', 'low').then((res) => (order.push('low'), res));
      await sleep(200);
      const high = waitingChat(gw, '/high', '10', 'high').then((res) => (order.push('high'), res));
      await eventually(async () => (await admin(gw, 'GET', '/admin/queue')).json().waiting === 2, 3000, 'both wait');
      const queue = (await admin(gw, 'GET', '/admin/queue')).json();
      assert.deepEqual(queue.by_priority, { high: 1, normal: 0, low: 1 });
      assert.deepEqual(queue.rules, [{ scope: 'provider', subject: 'up', period_label: 'concurrent', waiting: 2 }]);
      held.release();
      await (await held.response).text();
      assert.equal((await high).status, 200);
      assert.equal((await low).status, 200);
      assert.deepEqual(order, ['high', 'low']);
    });

    it('takes a waiter that disconnects out of the queue: nothing counted, nothing sent upstream', async () => {
      up.setLatency(0);
      const held = await heldRequest(gw, up, '/hold');
      const calls = up.callCount('/v1/chat/completions');
      const controller = new AbortController();
      const gone = fetch(`${gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${MASTER}`, [WAIT]: '10' },
        body: JSON.stringify(chat()),
        signal: controller.signal,
      }).catch(() => undefined);
      await eventually(async () => (await admin(gw, 'GET', '/admin/queue')).json().waiting === 1, 3000, 'it waits');
      controller.abort();
      await gone;
      await eventually(async () => (await admin(gw, 'GET', '/admin/queue')).json().waiting === 0, 3000, 'it left the queue');
      held.release();
      await (await held.response).text();
      await sleep(200);
      assert.equal(up.callCount('/v1/chat/completions'), calls, 'the upstream never saw it');
    });
  });

  it('serves a request waiting on a 3-second window once it frees, the upstream seeing exactly 3 calls', async () => {
    const gw = await startTestGateway({ yaml: `${upProvider(up.url)}rate_limits:\n  user_paths: [ { path: /w, limits: [ { period_seconds: 3, max_requests: 2 } ] } ]\n` });
    try {
      up.reset();
      // Start at the beginning of a 3-second window so both requests land in it.
      await sleep(3000 - (Date.now() % 3000) + 20);
      for (let i = 0; i < 2; i++) assert.equal((await chatAs(gw, '/w/a')).status, 200);
      const third = await chatAs(gw, '/w/b', chat(), { [WAIT]: '5' });
      assert.equal(third.status, 200, third.text);
      const waited = Number(third.headers.get(WAITED));
      assert.ok(waited >= 2500 && waited <= 4500, `waited ${waited} ms: the estimate drops below 2 a second into the next window`);
      assert.equal(up.callCount('/v1/chat/completions'), 3);
    } finally {
      await gw.close();
    }
  });

  it('takes turns among siblings: alice queues 5, then bob 1, and bob is served second', async () => {
    const gw = await startTestGateway({ yaml: `${upProvider(up.url)}server: { master_key: ${MASTER} }\nrate_limits:\n  user_paths: [ { path: /team, limits: [ { period: concurrent, max_requests: 1 } ] } ]\n` });
    try {
      up.reset();
      const held = await heldRequest(gw, up, '/team/carol');
      const order: string[] = [];
      const waiting: Array<Promise<unknown>> = [];
      for (let i = 1; i <= 5; i++) {
        waiting.push(waitingChat(gw, '/team/alice', '20').then(() => order.push(`alice${i}`)));
        await eventually(async () => (await admin(gw, 'GET', '/admin/queue')).json().waiting === i, 3000, `alice ${i} waits`);
      }
      waiting.push(waitingChat(gw, '/team/bob', '20').then(() => order.push('bob')));
      await eventually(async () => (await admin(gw, 'GET', '/admin/queue')).json().waiting === 6, 3000, 'bob waits');
      held.release();
      await (await held.response).text();
      await Promise.all(waiting);
      assert.equal(order[1], 'bob', `served in the order ${order.join(', ')}`);
    } finally {
      await gw.close();
    }
  });

  it('keeps headroom for higher priorities: low is refused at 8 of 10 while high reaches 10', async () => {
    const gw = await startTestGateway({
      yaml: `${upProvider(up.url)}server: { master_key: ${MASTER} }\nrate_limits:\n  queue: { headroom: { low: 0.2 } }\n  user_paths: [ { path: /team, limits: [ { period: hour, max_requests: 10 } ] } ]\n`,
    });
    try {
      for (let i = 0; i < 8; i++) assert.equal((await waitingChat(gw, '/team/batch', '0', 'low')).status, 200);
      const refused = await waitingChat(gw, '/team/batch', '0', 'low');
      assertRateLimited(refused, 'rate limit exceeded for /team: hour request limit of 10 reached for low priority');
      for (let i = 0; i < 2; i++) assert.equal((await waitingChat(gw, '/team/chat', '0', 'high')).status, 200);
      assertRateLimited(await waitingChat(gw, '/team/chat', '0', 'high'), 'rate limit exceeded for /team: hour request limit of 10 reached');
    } finally {
      await gw.close();
    }
  });

  describe('a managed key\'s max_priority, seen through headroom (low and normal may use 1 of a cap of 2)', () => {
    const rules = ['/master', '/low', '/plain', '/high'].map((path) => `    - { path: ${path}, limits: [ { period: hour, max_requests: 2 } ] }\n`).join('');
    const yaml = (master: boolean): string =>
      `${upProvider(up.url)}${master ? `server: { master_key: ${MASTER} }\n` : ''}rate_limits:\n  queue: { headroom: { normal: 0.5, low: 0.5 } }\n  user_paths:\n${rules}`;
    const createKey = async (gw: TestGateway, body: Record<string, unknown>): Promise<string> => {
      const res = await admin(gw, 'POST', '/admin/api-keys', body);
      assert.equal(res.status, 201, res.text);
      return res.json().key as string;
    };

    it('serves a request asking above its key\'s max_priority at that maximum (default normal), one asking below at what it asks; the master key at any', async () => {
      const gw = await startTestGateway({ yaml: yaml(true) });
      try {
        const low = await createKey(gw, { name: 'batch', user_path: '/low', max_priority: 'low' });
        const plain = await createKey(gw, { name: 'plain', user_path: '/plain' });
        const high = await createKey(gw, { name: 'chat', user_path: '/high', max_priority: 'high' });
        for (let i = 0; i < 2; i++) assert.equal((await waitingChat(gw, '/master', '0', 'high')).status, 200, 'the master key asks high and gets the whole cap');
        assert.equal((await waitingChat(gw, '/ignored', '0', 'low', high)).status, 200);
        assertRateLimited(await waitingChat(gw, '/ignored', '0', 'low', high), 'rate limit exceeded for /high: hour request limit of 2 reached for low priority');
        assert.equal((await waitingChat(gw, '/ignored', '0', 'high', high)).status, 200, 'a key with max_priority high may ask for the whole cap, and is not raised above what it asks');
        assert.equal((await waitingChat(gw, '/ignored', '0', 'high', low)).status, 200);
        assertRateLimited(await waitingChat(gw, '/ignored', '0', 'high', low), 'rate limit exceeded for /low: hour request limit of 2 reached for low priority');
        assert.equal((await waitingChat(gw, '/ignored', '0', 'high', plain)).status, 200);
        assertRateLimited(await waitingChat(gw, '/ignored', '0', 'high', plain), 'rate limit exceeded for /plain: hour request limit of 2 reached for normal priority');
      } finally {
        await gw.close();
      }
    });

    it('caps a managed key in open mode too, while a request without a key may ask for any priority', async () => {
      const gw = await startTestGateway({ yaml: yaml(false) });
      try {
        const low = await createKey(gw, { name: 'batch', user_path: '/low', max_priority: 'low' });
        for (let i = 0; i < 2; i++) assert.equal((await chatAs(gw, '/master', chat(), { [PRIORITY]: 'high' })).status, 200, 'no key: any priority');
        assert.equal((await chatAs(gw, '/ignored', chat(), { authorization: `Bearer ${low}`, [PRIORITY]: 'high' })).status, 200);
        assertRateLimited(await chatAs(gw, '/ignored', chat(), { authorization: `Bearer ${low}`, [PRIORITY]: 'high' }), 'rate limit exceeded for /low: hour request limit of 2 reached for low priority');
      } finally {
        await gw.close();
      }
    });
  });

  it('refuses a place with queue_full past max_depth', async () => {
    const gw = await startTestGateway({
      yaml: `${upProvider(up.url)}server: { master_key: ${MASTER} }\nrate_limits:\n  queue: { max_depth: 1 }\n  providers: [ { name: up, limits: [ { period: concurrent, max_requests: 1 } ] } ]\n`,
    });
    try {
      up.reset();
      const held = await heldRequest(gw, up, '/a');
      const waiting = waitingChat(gw, '/b', '10');
      await eventually(async () => (await admin(gw, 'GET', '/admin/queue')).json().waiting === 1, 3000, 'one waits');
      const full = await waitingChat(gw, '/c', '10');
      assert.equal(full.status, 429);
      assert.equal(full.json().error.code, 'queue_full');
      assert.equal(full.json().error.message, 'queue full: 1 requests already waiting');
      held.release();
      await (await held.response).text();
      assert.equal((await waiting).status, 200);
    } finally {
      await gw.close();
    }
  });

  it('waits by default with rate_limits.queue.default_wait_seconds, never past max_wait_seconds', async () => {
    const gw = await startTestGateway({
      yaml: `${upProvider(up.url)}server: { master_key: ${MASTER} }\nrate_limits:\n  queue: { default_wait_seconds: 1.5, max_wait_seconds: 2 }\n  providers: [ { name: up, limits: [ { period: concurrent, max_requests: 1 } ] } ]\n`,
    });
    try {
      up.reset();
      const held = await heldRequest(gw, up, '/a');
      const byDefault = await chatAs(gw, '/b', chat(), { authorization: `Bearer ${MASTER}` });
      assert.equal(byDefault.status, 429);
      assert.ok(Number(byDefault.headers.get(WAITED)) >= 900, 'it waited by default');
      const capped = await waitingChat(gw, '/b', '60');
      assert.equal(capped.status, 429);
      assert.ok(Number(capped.headers.get(WAITED)) <= 2200, `never past max_wait_seconds (${capped.headers.get(WAITED)} ms)`);
      const explained = (await admin(gw, 'GET', '/admin/rate-limits/explain?model=up/gpt-x&user_path=/b&max_wait=1.5')).json();
      assert.equal(explained.decision, 'refused');
      assert.deepEqual(explained.wait, { would_wait: true, at_most_seconds: 1.5 });
      const notWaiting = (await admin(gw, 'GET', '/admin/rate-limits/explain?model=up/gpt-x&user_path=/b&max_wait=0.5')).json();
      assert.deepEqual(notWaiting.wait, { would_wait: false, at_most_seconds: 0 });
      held.release();
      await (await held.response).text();
    } finally {
      await gw.close();
    }
  });

  it('answers every waiter its 429 at shutdown', async () => {
    const gw = await startTestGateway({
      yaml: `${upProvider(up.url)}server: { master_key: ${MASTER} }\nrate_limits:\n  providers: [ { name: up, limits: [ { period: concurrent, max_requests: 1 } ] } ]\n`,
    });
    up.reset();
    const held = await heldRequest(gw, up, '/a');
    const waiters = [waitingChat(gw, '/b', '20'), waitingChat(gw, '/c', '20', 'low')];
    await eventually(async () => (await admin(gw, 'GET', '/admin/queue')).json().waiting === 2, 3000, 'both wait');
    const closing = gw.close();
    for (const waiter of waiters) {
      const res = await waiter;
      assert.equal(res.status, 429);
      assert.ok(res.headers.get(WAITED) !== null);
    }
    held.release();
    await closing;
  });
});
