/**
 * End-to-end: concurrency slots (held for the whole response, released on every way a
 * request can end) and admission under parallel load.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { startFakeUpstream, type FakeUpstream } from '../support/fake-upstream.ts';
import { startTestGateway, type TestGateway } from '../support/gateway.ts';
import { waitFor } from '../support/e2e.ts';
import {
  USER_PATH_HEADER,
  assertRateLimited,
  chat,
  chatAs,
  eventually,
  rateLimitHeaderNames,
  sleep,
  startCountingProxy,
  upProvider,
} from '../support/rate-limits.ts';

const CONCURRENT_1 = 'rate_limits:\n  user_paths: [ { path: /c, limits: [ { period: concurrent, max_requests: 1 } ] } ]\n';
const REFUSED = 'rate limit exceeded for /c: concurrent request limit of 1 reached';

async function setup(providerExtra = ''): Promise<{ up: FakeUpstream; gw: TestGateway; close(): Promise<void> }> {
  const up = await startFakeUpstream({ name: 'up' });
  const gw = await startTestGateway({ yaml: upProvider(up.url, ['gpt-x'], providerExtra) + CONCURRENT_1 });
  return {
    up,
    gw,
    close: async () => {
      await gw.close();
      await up.close();
    },
  };
}

function streamChat(gw: TestGateway, userPath: string, signal?: AbortSignal): Promise<Response> {
  return fetch(`${gw.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', [USER_PATH_HEADER]: userPath },
    body: JSON.stringify(chat('up/gpt-x', 'one two three four five', { stream: true })),
    ...(signal ? { signal } : {}),
  });
}

/** The slot is free again: a new request under /c is admitted (polled; refusals count nothing). */
async function slotFreed(gw: TestGateway, what: string): Promise<void> {
  await eventually(async () => (await chatAs(gw, '/c/next')).status === 200, 3000, what);
}

/** Asserts the slot is taken right now. */
async function assertSlotTaken(gw: TestGateway): Promise<void> {
  const res = await chatAs(gw, '/c/other');
  const retryAfter = assertRateLimited(res, REFUSED);
  assert.equal(retryAfter, 1, 'Retry-After is always 1 for concurrency');
  assert.equal(res.headers.get('retry-after-ms'), '1000');
  assert.equal(res.headers.get('x-ratelimit-remaining-requests'), null, 'no request triple for a concurrency breach');
}

describe('rate limits: concurrency slots', { concurrency: true, timeout: 40_000 }, () => {
  it('a held stream takes the slot; a second request gets 429; the slot comes back when the stream ends', async () => {
    const s = await setup();
    try {
      const release = s.up.holdStreamNext();
      const held = await streamChat(s.gw, '/c/a');
      assert.equal(held.status, 200);
      assert.deepEqual(rateLimitHeaderNames(held), [], 'a concurrent rule alone sets no x-ratelimit headers');
      await assertSlotTaken(s.gw);
      await assertSlotTaken(s.gw);
      assert.equal(s.up.callCount(), 1, 'refused requests never reach the upstream');
      release();
      const text = await held.text();
      assert.match(text, /\[DONE\]/);
      await slotFreed(s.gw, 'slot released after the stream finished');
      // and it is taken again by a new held stream
      const release2 = s.up.holdStreamNext();
      const held2 = await streamChat(s.gw, '/c/b');
      await assertSlotTaken(s.gw);
      release2();
      await held2.text();
    } finally {
      await s.close();
    }
  });

  it('in_flight is visible in the admin list; a reset while a slot is held frees it, and the old slot release takes nothing back', async () => {
    const s = await setup();
    const inFlight = async (): Promise<number | undefined> => {
      const res = await s.gw.request('GET', '/admin/rate-limits');
      assert.equal(res.status, 200, res.text);
      return res.json().rate_limits.find((r: { subject: string }) => r.subject === '/c')?.in_flight;
    };
    const releases: Array<() => void> = [];
    try {
      assert.equal(await inFlight(), 0);
      releases.push(s.up.holdStreamNext());
      const first = await streamChat(s.gw, '/c/a');
      assert.equal(await inFlight(), 1);
      await assertSlotTaken(s.gw);

      const reset = await s.gw.request('POST', '/admin/rate-limits/reset', { body: { confirmation: 'reset' } });
      assert.equal(reset.status, 200, reset.text);
      assert.equal(await inFlight(), 0);

      releases.push(s.up.holdStreamNext());
      const second = await streamChat(s.gw, '/c/b');
      assert.equal(second.status, 200, 'admitted after the reset');
      assert.equal(await inFlight(), 1);

      releases[0]!();
      await first.text();
      await sleep(100);
      assert.equal(await inFlight(), 1, 'the pre-reset slot gave nothing back');
      await assertSlotTaken(s.gw);
      releases[1]!();
      await second.text();
      await eventually(async () => (await inFlight()) === 0, 3000, 'second slot released');
      await slotFreed(s.gw, 'slot free');
    } finally {
      for (const release of releases) release();
      await s.close();
    }
  });

  it('the slot is released when the client disconnects mid-stream', async () => {
    const s = await setup();
    const release = s.up.holdStreamNext();
    try {
      const controller = new AbortController();
      const held = await streamChat(s.gw, '/c/a', controller.signal);
      const reader = held.body!.getReader();
      const first = await reader.read();
      assert.equal(first.done, false);
      await assertSlotTaken(s.gw);
      controller.abort();
      await reader.read().catch(() => undefined);
      await slotFreed(s.gw, 'slot released after the client went away');
      await waitFor(() => s.up.calls[0]?.aborted === true, 3000, 'upstream request aborted');
    } finally {
      release();
      await s.close();
    }
  });

  it('the slot is released when the upstream answers 500', async () => {
    const s = await setup();
    try {
      s.up.failNext(1, { status: 500 });
      const res = await chatAs(s.gw, '/c/a');
      assert.equal(res.status, 500, res.text);
      assert.equal(res.json().error.type, 'provider_error');
      await slotFreed(s.gw, 'slot released after an upstream 500');
      s.up.failNext(1, { status: 500 });
      const streamed = await streamChat(s.gw, '/c/a');
      assert.equal(streamed.status, 500);
      await streamed.text();
      await slotFreed(s.gw, 'slot released after an upstream 500 to a stream');
    } finally {
      await s.close();
    }
  });

  it('the slot is released when the upstream drops the stream', async () => {
    const s = await setup();
    try {
      s.up.dropStreamNext(1);
      const res = await streamChat(s.gw, '/c/a');
      await res.text().catch(() => undefined);
      await slotFreed(s.gw, 'slot released after a dropped stream');
      assert.equal(s.up.callCount(), 2);
    } finally {
      await s.close();
    }
  });

  it('the slot is released when the upstream times out', async () => {
    const s = await setup('timeout_ms: 300');
    try {
      s.up.hangNext(1);
      const pending = chatAs(s.gw, '/c/a');
      await waitFor(() => s.up.callCount() === 1, 3000, 'upstream called');
      await assertSlotTaken(s.gw);
      const res = await pending;
      assert.equal(res.status, 504, res.text);
      assert.equal(res.json().error.type, 'provider_error');
      await slotFreed(s.gw, 'slot released after an upstream timeout');
    } finally {
      await s.close();
    }
  });

  it('200 parallel requests against a request cap of 50 admit exactly 50', async () => {
    const up = await startFakeUpstream({ name: 'up' });
    const gw = await startTestGateway({
      yaml: upProvider(up.url) + 'rate_limits:\n  user_paths: [ { path: /burst, limits: [ { period: hour, max_requests: 50 } ] } ]\n',
    });
    try {
      const statuses = await Promise.all(
        Array.from({ length: 200 }, (_, i) =>
          fetch(`${gw.url}/v1/chat/completions`, {
            method: 'POST',
            headers: { 'content-type': 'application/json', [USER_PATH_HEADER]: `/burst/u${i % 7}` },
            body: JSON.stringify(chat('up/gpt-x', `n${i}`)),
          }).then(async (r) => {
            await r.arrayBuffer();
            return r.status;
          }),
        ),
      );
      assert.equal(statuses.filter((x) => x === 200).length, 50);
      assert.equal(statuses.filter((x) => x === 429).length, 150);
      assert.equal(up.callCount(), 50);
    } finally {
      await gw.close();
      await up.close();
    }
  });

  it('a concurrent cap of 5 never lets more than 5 requests be in flight at the upstream', async () => {
    const up = await startFakeUpstream({ name: 'up', latencyMs: 120 });
    const proxy = await startCountingProxy(up.url);
    const gw = await startTestGateway({
      yaml: upProvider(proxy.url) + 'rate_limits:\n  providers: [ { name: up, limits: [ { period: concurrent, max_requests: 5 } ] } ]\n',
    });
    try {
      let ok = 0;
      let refused = 0;
      // 20 clients, each retrying on 429 until it has had 2 answers (bounded, so a leaked slot fails instead of hanging).
      const deadline = Date.now() + 15_000;
      await Promise.all(
        Array.from({ length: 20 }, async (_, i) => {
          let mine = 0;
          while (mine < 2) {
            assert.ok(Date.now() < deadline, `client ${i} starved: ${ok} answered, ${refused} refused, ${proxy.inFlight} in flight`);
            const res = await chatAs(gw, `/w${i}`, chat('up/gpt-x', `w${i}`));
            if (res.status === 200) {
              mine++;
              ok++;
            } else {
              assert.equal(res.status, 429, res.text);
              assert.equal(res.json().error.message, 'rate limit exceeded for provider up: concurrent request limit of 5 reached');
              refused++;
              await sleep(10 + (i % 5) * 3);
            }
          }
        }),
      );
      assert.equal(ok, 40);
      assert.ok(refused > 0, 'the cap was reached');
      assert.ok(proxy.maxInFlight <= 5, `at most 5 in flight at the upstream, saw ${proxy.maxInFlight}`);
      assert.ok(proxy.maxInFlight >= 2, `requests did run in parallel (max ${proxy.maxInFlight})`);
      assert.equal(proxy.total, 40, 'refused requests never reached the upstream');
    } finally {
      await gw.close();
      await proxy.close();
      await up.close();
    }
  });
});
