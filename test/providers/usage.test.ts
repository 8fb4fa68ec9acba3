import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { modelFromJsonBuffer, normalizeUsage, usageFromBody, usageFromJsonBuffer } from '../../src/providers/usage.ts';

const of = (value: unknown, space?: number): ReturnType<typeof usageFromJsonBuffer> => usageFromJsonBuffer(Buffer.from(JSON.stringify(value, null, space)));

describe('usageFromJsonBuffer', () => {
  it('reads chat, embeddings, Responses and Messages usage', () => {
    const chat = { id: 'c', choices: [{ index: 0, message: { role: 'assistant', content: 'hi' } }], usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5, prompt_tokens_details: { cached_tokens: 0 } } };
    assert.deepEqual(of(chat), { promptTokens: 3, completionTokens: 2, totalTokens: 5, cachedPromptTokens: 0 });
    assert.deepEqual(of({ object: 'list', data: [{ embedding: [0.1] }], usage: { prompt_tokens: 4, total_tokens: 4 } }), { promptTokens: 4, completionTokens: 0, totalTokens: 4 });
    assert.deepEqual(of({ object: 'response', output: [{ type: 'message', content: [{ type: 'output_text', text: 'x' }] }], usage: { input_tokens: 7, output_tokens: 1, total_tokens: 8 } }), { promptTokens: 7, completionTokens: 1, totalTokens: 8 });
    assert.deepEqual(of({ type: 'message', content: [], usage: { input_tokens: 2, output_tokens: 3, cache_read_input_tokens: 5 } }), { promptTokens: 7, completionTokens: 3, totalTokens: 10, cachedPromptTokens: 5 });
  });

  it('reads cached prompt tokens: OpenAI chat and Responses details, Anthropic cache reads (writes are prompt tokens only)', () => {
    const chat = { choices: [], usage: { prompt_tokens: 1200, completion_tokens: 80, total_tokens: 1280, prompt_tokens_details: { cached_tokens: 1024, audio_tokens: 0 } } };
    assert.deepEqual(of(chat), { promptTokens: 1200, completionTokens: 80, totalTokens: 1280, cachedPromptTokens: 1024 });
    const responses = { object: 'response', usage: { input_tokens: 900, input_tokens_details: { cached_tokens: 512 }, output_tokens: 10, total_tokens: 910 } };
    assert.deepEqual(of(responses), { promptTokens: 900, completionTokens: 10, totalTokens: 910, cachedPromptTokens: 512 });
    const messages = { type: 'message', usage: { input_tokens: 20, cache_creation_input_tokens: 300, cache_read_input_tokens: 4000, output_tokens: 50 } };
    assert.deepEqual(of(messages), { promptTokens: 4320, completionTokens: 50, totalTokens: 4370, cachedPromptTokens: 4000 });
    assert.equal(of({ usage: { prompt_tokens: 3, completion_tokens: 1 } })?.cachedPromptTokens, undefined);
  });

  it('agrees with a full parse when usage is not last, is pretty-printed, or text mentions "usage"', () => {
    const bodies: unknown[] = [
      { usage: { prompt_tokens: 1, completion_tokens: 1 }, id: 'x', choices: [] },
      { choices: [{ message: { content: 'my "usage": {"prompt_tokens": 999} and \\ backslashes "}' } }], usage: { prompt_tokens: 2, completion_tokens: 4 } },
      { choices: [{ message: { content: '{ "usage": { "prompt_tokens": 9 } }' } }] },
      { response: { usage: { input_tokens: 5, output_tokens: 6 } } },
      { usage: null },
      { usage: 12 },
      { usage: { note: 'no counts here' } },
      { choices: [], usage: { prompt_tokens: 3, completion_tokens: 0, details: { '}': '{', nested: { deep: [1, 2] } } } },
      { usage: { note: 'a } b', prompt_tokens: 6, completion_tokens: 1 } },
      { usage: { 'x{': 1, prompt_tokens: 7, completion_tokens: 1 } },
    ];
    for (const body of bodies) {
      for (const space of [undefined, 2]) {
        assert.deepEqual(of(body, space), usageFromBody(body), JSON.stringify(body));
      }
    }
  });

  it('is undefined for bodies that are empty, not JSON, or have no usage', () => {
    assert.equal(usageFromJsonBuffer(Buffer.alloc(0)), undefined);
    assert.equal(usageFromJsonBuffer(Buffer.from('<html>"usage": {</html>')), undefined);
    assert.equal(usageFromJsonBuffer(Buffer.from('{"id":"x","choices":[]}')), undefined);
  });

  it('reads multi-byte text around the usage object', () => {
    assert.deepEqual(of({ choices: [{ message: { content: 'héllo wörld ✓ 🎉' } }], usage: { prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 } }), { promptTokens: 1, completionTokens: 2, totalTokens: 3 });
  });
});

describe('token counts as reported', () => {
  it('are whole numbers from 0 to 1e12, whatever the upstream sent', () => {
    assert.deepEqual(normalizeUsage({ prompt_tokens: 10.5, completion_tokens: -4, total_tokens: 1e300 }), { promptTokens: 11, completionTokens: 0, totalTokens: 1e12 });
    assert.deepEqual(normalizeUsage({ prompt_tokens: 2 ** 70, completion_tokens: -Infinity }), { promptTokens: 1e12, completionTokens: 0, totalTokens: 1e12 });
    assert.deepEqual(normalizeUsage({ input_tokens: 0.2, output_tokens: 'many', cache_read_input_tokens: 1e13 }), { promptTokens: 1e12, completionTokens: 0, totalTokens: 1e12, cachedPromptTokens: 1e12 });
    // One count that is not a number does not lose the other.
    assert.deepEqual(normalizeUsage({ prompt_tokens: '12', completion_tokens: 3 }), { promptTokens: 0, completionTokens: 3, totalTokens: 3 });
    // JSON's 1e400 reads as Infinity: capped like any huge count.
    assert.deepEqual(usageFromJsonBuffer(Buffer.from('{"usage":{"prompt_tokens":1e400,"completion_tokens":3.2}}')), { promptTokens: 1e12, completionTokens: 4, totalTokens: 1e12 });
  });
});

describe('modelFromJsonBuffer', () => {
  const model = (text: string): string | undefined => modelFromJsonBuffer(Buffer.from(text));

  it('reads the first model key with a string value', () => {
    assert.equal(model('{"id":"c","object":"chat.completion","model":"gpt-4o-2024","choices":[]}'), 'gpt-4o-2024');
    assert.equal(model('{"object":"model", "model" :  "x\\"y\\u00e9"}'), 'x"yé');
    assert.equal(model('{"model":"héllo 🎉"}'), 'héllo 🎉');
  });

  it('is undefined without one: no such key, a value that is not a string, or no JSON at all', () => {
    assert.equal(model('{"object":"list","data":[{"id":"m","object":"model"}]}'), undefined);
    assert.equal(model('{"model":42}'), undefined);
    assert.equal(model('{"model":""}'), undefined);
    assert.equal(model('{"model":"unterminated'), undefined);
    assert.equal(model('not json'), undefined);
  });
});
