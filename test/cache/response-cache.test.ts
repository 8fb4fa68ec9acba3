/**
 * ResponseCache (LRU + TTL with an injected clock), cacheKey (canonical, scoped by user
 * path, endpoint, model and parameters; `stream` ignored) and cacheMode (Cache-Control).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ResponseCache, cacheKey, cacheMode, type CachedResponse } from '../../src/cache/response-cache.ts';

function entry(text: string): CachedResponse {
  return { status: 200, headers: { 'content-type': 'application/json' }, body: Buffer.from(text), provider: 'a', model: 'm1' };
}

function clocked(ttlSeconds: number, maxEntries: number): { cache: ResponseCache; advance(ms: number): void } {
  let now = 1_700_000_000_000;
  const cache = new ResponseCache({ ttlSeconds, maxEntries, now: () => now });
  return { cache, advance: (ms) => { now += ms; } };
}

describe('ResponseCache', () => {
  it('returns what was stored, until the TTL has passed', () => {
    const { cache, advance } = clocked(2, 10);
    cache.set('k', entry('one'));
    assert.equal(cache.get('k')?.body.toString(), 'one');
    advance(1999);
    assert.equal(cache.get('k')?.body.toString(), 'one', 'still fresh 1 ms before expiry');
    advance(1);
    assert.equal(cache.get('k'), undefined, 'expired exactly at the TTL');
    assert.equal(cache.size, 0, 'an expired entry is dropped when looked up');
  });

  it('a read does not extend the TTL; a new set does', () => {
    const { cache, advance } = clocked(1, 10);
    cache.set('k', entry('one'));
    advance(900);
    assert.ok(cache.get('k'));
    advance(200);
    assert.equal(cache.get('k'), undefined, 'TTL counts from the write, not the last read');
    cache.set('k', entry('two'));
    advance(900);
    cache.set('k', entry('three'));
    advance(900);
    assert.equal(cache.get('k')?.body.toString(), 'three', 'overwriting restarts the TTL');
  });

  it('unknown keys miss', () => {
    const { cache } = clocked(60, 10);
    assert.equal(cache.get('nope'), undefined);
  });

  it('evicts the least recently used entry beyond max_entries; a recently read entry survives', () => {
    const { cache } = clocked(60, 3);
    cache.set('a', entry('a'));
    cache.set('b', entry('b'));
    cache.set('c', entry('c'));
    assert.ok(cache.get('a'), 'a is read: now the most recently used');
    cache.set('d', entry('d'));
    assert.equal(cache.size, 3);
    assert.equal(cache.get('b'), undefined, 'b was the least recently used');
    assert.ok(cache.get('a'), 'a survived thanks to the read');
    assert.ok(cache.get('c'));
    assert.ok(cache.get('d'));
    // now the order (oldest first) is a, c, d
    cache.set('e', entry('e'));
    assert.equal(cache.get('a'), undefined);
    assert.deepEqual(['c', 'd', 'e'].map((k) => cache.get(k)?.body.toString()), ['c', 'd', 'e']);
  });

  it('overwriting a key refreshes its recency without growing the cache', () => {
    const { cache } = clocked(60, 2);
    cache.set('a', entry('a1'));
    cache.set('b', entry('b'));
    cache.set('a', entry('a2'));
    assert.equal(cache.size, 2);
    cache.set('c', entry('c'));
    assert.equal(cache.get('b'), undefined, 'b became the oldest when a was rewritten');
    assert.equal(cache.get('a')?.body.toString(), 'a2');
  });

  it('max_entries 1 keeps only the latest entry', () => {
    const { cache } = clocked(60, 1);
    cache.set('a', entry('a'));
    cache.set('b', entry('b'));
    assert.equal(cache.size, 1);
    assert.equal(cache.get('a'), undefined);
    assert.ok(cache.get('b'));
  });
});

describe('cacheKey', () => {
  const body = { model: 'a/m1', messages: [{ role: 'user', content: 'hi' }], temperature: 0.2, max_tokens: 10 };

  it('is stable under key order, at every depth', () => {
    const reordered = { max_tokens: 10, messages: [{ content: 'hi', role: 'user' }], temperature: 0.2, model: 'a/m1' };
    assert.equal(cacheKey('chat', 'a/m1', body, '/u'), cacheKey('chat', 'a/m1', reordered, '/u'));
    assert.equal(cacheKey('chat', 'a/m1', body, '/u'), cacheKey('chat', 'a/m1', { ...body }, '/u'), 'deterministic');
  });

  it('differs by user path, unless shared (null)', () => {
    assert.notEqual(cacheKey('chat', 'a/m1', body, '/u1'), cacheKey('chat', 'a/m1', body, '/u2'));
    assert.notEqual(cacheKey('chat', 'a/m1', body, '/u1'), cacheKey('chat', 'a/m1', body, null));
    assert.equal(cacheKey('chat', 'a/m1', body, null), cacheKey('chat', 'a/m1', body, null));
  });

  it('differs by model (as routing resolved it) and by endpoint', () => {
    assert.notEqual(cacheKey('chat', 'a/m1', body, '/u'), cacheKey('chat', 'b/m1', body, '/u'));
    assert.notEqual(cacheKey('chat', 'a/m1', body, '/u'), cacheKey('chat', 'alias:fast', body, '/u'));
    assert.notEqual(cacheKey('chat', 'a/m1', body, '/u'), cacheKey('responses', 'a/m1', body, '/u'));
  });

  it('the body model field is not part of the key (the resolved model is)', () => {
    assert.equal(cacheKey('chat', 'a/m1', body, '/u'), cacheKey('chat', 'a/m1', { ...body, model: 'm1' }, '/u'));
  });

  it('differs by any parameter', () => {
    const base = cacheKey('chat', 'a/m1', body, '/u');
    const variants: Array<Record<string, unknown>> = [
      { ...body, temperature: 0.3 },
      { ...body, max_tokens: 11 },
      { ...body, messages: [{ role: 'user', content: 'hi!' }] },
      { ...body, messages: [{ role: 'system', content: 'hi' }] },
      { ...body, messages: [...body.messages, { role: 'user', content: 'hi' }] },
      { ...body, top_p: 1 },
      { ...body, temperature: '0.2' },
      { ...body, user: null },
    ];
    const keys = variants.map((v) => cacheKey('chat', 'a/m1', v, '/u'));
    for (const [i, key] of keys.entries()) assert.notEqual(key, base, `variant ${i} must not share the key`);
    assert.equal(new Set(keys).size, keys.length, 'variants are distinct from each other');
  });

  it('ignores stream (only non-streaming requests are cached)', () => {
    const base = cacheKey('chat', 'a/m1', body, '/u');
    assert.equal(cacheKey('chat', 'a/m1', { ...body, stream: false }, '/u'), base);
    assert.equal(cacheKey('chat', 'a/m1', { ...body, stream: true }, '/u'), base);
  });

  it('an undefined-valued nested field is the same as an absent one', () => {
    const withUndefined = { ...body, messages: [{ role: 'user', content: 'hi', name: undefined }] };
    assert.equal(cacheKey('chat', 'a/m1', withUndefined, '/u'), cacheKey('chat', 'a/m1', body, '/u'));
  });

  it('is a compact URL-safe digest that does not carry the prompt', () => {
    const key = cacheKey('chat', 'a/m1', { messages: [{ role: 'user', content: 'x'.repeat(10_000) }] }, '/u');
    assert.match(key, /^[A-Za-z0-9_-]{43}$/);
  });
});

describe('cacheMode', () => {
  it('no header: use the cache', () => {
    assert.equal(cacheMode(undefined), 'use');
    assert.equal(cacheMode(''), 'use');
    assert.equal(cacheMode('max-age=60'), 'use');
  });

  it('no-cache: skip the lookup, store the fresh answer', () => {
    assert.equal(cacheMode('no-cache'), 'refresh');
    assert.equal(cacheMode('No-Cache'), 'refresh');
    assert.equal(cacheMode('max-age=0, no-cache'), 'refresh');
  });

  it('no-store: skip both (wins over no-cache)', () => {
    assert.equal(cacheMode('no-store'), 'bypass');
    assert.equal(cacheMode('NO-STORE'), 'bypass');
    assert.equal(cacheMode('no-cache, no-store'), 'bypass');
    assert.equal(cacheMode('no-store, no-cache'), 'bypass');
  });
});
