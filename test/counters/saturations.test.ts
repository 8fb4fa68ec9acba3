import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseSaturation } from '../../src/counters/redis/saturations.ts';

describe('saturation messages between gateways', () => {
  it('reads the key, how long it lasts and why, whatever the key holds', () => {
    assert.deepEqual(parseSaturation('{floodgate:}lc:openai/gpt-4o\n2500\n2'), { redisKey: '{floodgate:}lc:openai/gpt-4o', forMs: 2500, cause: 'requests' });
    assert.deepEqual(parseSaturation('{p:}lc:x/a\nb\n0\n0'), { redisKey: '{p:}lc:x/a\nb', forMs: 0, cause: undefined });
  });

  it('ignores a message it cannot read', () => {
    for (const text of ['', 'key', 'key\n5', '\n5\n1', 'key\n-5\n1', 'key\n5\n4', 'key\n1.5\n1', 'key\nNaN\n1', 'key\n5\n']) {
      assert.equal(parseSaturation(text), undefined, JSON.stringify(text));
    }
  });
});
