import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { countTokens as cl100k } from 'gpt-tokenizer/encoding/cl100k_base';
import { countTokens as o200k } from 'gpt-tokenizer/encoding/o200k_base';
import { countTokens, encodingOf, loadDefaultEncoding } from '../../src/tokens/count.ts';
import { RelayedStream, estimatePromptTokens, estimateStreamUsage, promptParts } from '../../src/tokens/estimate.ts';
import { allowedCompletionTokens, estimateRequestTokens } from '../../src/tokens/reservation.ts';

const sse = (events: unknown[]): Buffer => Buffer.from(events.map((e) => `data: ${JSON.stringify(e)}\n\n`).join('') + 'data: [DONE]\n\n');

function relayed(...chunks: Buffer[]): RelayedStream {
  const stream = new RelayedStream();
  for (const chunk of chunks) stream.add(chunk);
  return stream;
}

describe('token counts', () => {
  it('counts with the encoding OpenAI uses for the model, o200k_base for any other model', async () => {
    assert.equal(encodingOf('gpt-4o-mini'), 'o200k_base');
    assert.equal(encodingOf('gpt-4'), 'cl100k_base');
    assert.equal(encodingOf('gpt-3.5-turbo'), 'cl100k_base');
    assert.equal(encodingOf('text-embedding-3-small'), 'cl100k_base');
    assert.equal(encodingOf('claude-sonnet-4'), 'o200k_base');
    const text = 'The quick brown fox jumps over the lazy dog, twice: über façade 😀.';
    assert.equal(await countTokens('gpt-4o', [text]), o200k(text));
    assert.equal(await countTokens('gpt-4', [text]), cl100k(text));
    assert.equal(await countTokens('gpt-4o', [text, text]), 2 * o200k(text));
    assert.equal(await countTokens('gpt-4o', []), 0);
  });

  it('counts at once, without a promise, once the encoding is loaded', async () => {
    await loadDefaultEncoding();
    const text = 'Say hello in one short sentence.';
    assert.equal(countTokens('gpt-4o', [text]), o200k(text));
    assert.deepEqual(estimateRequestTokens('claude-sonnet-4', 'chat', { messages: [{ role: 'user', content: text }], max_tokens: 32 }, 256), {
      promptTokens: o200k(text) + 3 + 3,
      completionTokens: 32,
      totalTokens: o200k(text) + 6 + 32,
    });
  });

  it('is exact for texts split at their spaces, and estimates past 32K characters at the same rate', async () => {
    const text = 'The quick brown fox jumps over the lazy dog.\n'.repeat(600);
    assert.ok(text.length < 32 * 1024);
    assert.equal(await countTokens('gpt-4o', [text]), o200k(text));
    const long = 'hello world, again and again. '.repeat(20_000);
    const estimate = await countTokens('gpt-4o', [long]);
    const exact = o200k(long);
    assert.ok(Math.abs(estimate - exact) / exact < 0.02, `${estimate} for ${exact}`);
  });

  it('counts a text without spaces in bounded pieces: megabytes of one letter do not hold the event loop', { timeout: 30_000 }, async () => {
    // Counted whole, BPE's cost grows with the square of such a run: this one would take hours.
    const run = 'x'.repeat(12 * 1024 * 1024);
    const tokens = await countTokens('gpt-4o', [run]);
    // o200k_base encodes eight x's as one token.
    assert.ok(Math.abs(tokens - run.length / 8) / (run.length / 8) < 0.01, String(tokens));
  });

  it('counts special-token markup, NUL and lone surrogates as plain text instead of failing', async () => {
    assert.ok((await countTokens('gpt-4o', ['<|endoftext|> and <|im_start|>'])) > 2);
    assert.ok((await countTokens('gpt-4o', ['a\u0000b \ud800 c\udfff'])) > 0);
  });
});

describe('prompt estimates', () => {
  it('reads a chat request\'s texts and tools, never its images or identifiers', () => {
    const body = {
      model: 'gpt-4o',
      stream: true,
      user: 'someone',
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: [{ type: 'text', text: 'Describe this:' }, { type: 'image_url', image_url: { url: `data:image/png;base64,${'A'.repeat(5000)}` } }] },
        { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'look', arguments: '{"at":"sky"}' } }] },
        { role: 'tool', tool_call_id: 'call_1', content: 'blue' },
      ],
      tools: [{ type: 'function', function: { name: 'look', parameters: { type: 'object' } } }],
    };
    const parts = promptParts(body);
    assert.equal(parts.messages, 4);
    assert.deepEqual(parts.texts.sort(), ['Be brief.', 'Describe this:', 'blue', 'look', '{"at":"sky"}', JSON.stringify(body.tools)].sort());
  });

  it('reads Anthropic and Responses requests, and embeddings inputs without a message overhead', () => {
    const anthropic = promptParts({
      model: 'claude-x',
      max_tokens: 100,
      system: [{ type: 'text', text: 'Rules.', cache_control: { type: 'ephemeral' } }],
      messages: [
        { role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AAAA' } }, { type: 'text', text: 'Hi' }] },
        { role: 'assistant', content: [{ type: 'tool_use', id: 'tu_1', name: 'calc', input: { x: 1 } }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'tu_1', content: '2' }] },
      ],
    });
    assert.equal(anthropic.messages, 3);
    assert.deepEqual(anthropic.texts.sort(), ['2', 'Hi', 'Rules.', 'calc', '{"x":1}'].sort());
    const responses = promptParts({ model: 'gpt-4o', instructions: 'Short.', input: [{ role: 'user', content: [{ type: 'input_text', text: 'Go' }] }], text: { format: { type: 'text' } } });
    assert.equal(responses.messages, 1);
    assert.deepEqual(responses.texts.sort(), ['Go', 'Short.', '{"format":{"type":"text"}}'].sort());
    assert.deepEqual(promptParts({ model: 'emb', input: ['one', 'two'] }), { texts: ['one', 'two'], messages: 0 });
    assert.deepEqual(promptParts(undefined), { texts: [], messages: 0 });
  });

  it('adds OpenAI\'s chat overhead: 3 tokens a message and 3 priming the reply', async () => {
    const body = { model: 'gpt-4o', messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hello there' }] };
    assert.equal(await estimatePromptTokens('gpt-4o', body), o200k('Be brief.') + o200k('Hello there') + 2 * 3 + 3);
    assert.equal(await estimatePromptTokens('emb', { input: 'Hello there' }), o200k('Hello there'));
  });
});

describe('completion tokens a request allows', () => {
  it('takes the first positive cap of the dialects\' fields, times n choices, else the default', () => {
    assert.equal(allowedCompletionTokens('chat', { max_completion_tokens: 100, max_tokens: 50 }, 256), 100);
    assert.equal(allowedCompletionTokens('chat', { max_completion_tokens: 0, max_tokens: 50 }, 256), 50, 'a cap of 0 is no cap');
    assert.equal(allowedCompletionTokens('responses', { max_output_tokens: 20.5 }, 256), 21);
    assert.equal(allowedCompletionTokens('messages', { max_tokens: '64' }, 256), 256, 'a cap that is not a number is none');
    assert.equal(allowedCompletionTokens('chat', { max_tokens: 10, n: 3 }, 256), 30);
    assert.equal(allowedCompletionTokens('chat', { n: 2 }, 256), 512);
    assert.equal(allowedCompletionTokens('embeddings', { max_tokens: 10 }, 256), 0, 'an embedding completes nothing');
    assert.equal(allowedCompletionTokens('chat', undefined, 256), 256);
  });
});

describe('completion estimates from the content relayed', () => {
  it('counts chat deltas (content, refusals, tool calls), however the bytes were split', async () => {
    const bytes = sse([
      { choices: [{ index: 0, delta: { role: 'assistant', content: 'Hello, ' } }] },
      { choices: [{ index: 0, delta: { content: 'wonderful world' } }] },
      { choices: [{ index: 0, delta: { tool_calls: [{ index: 0, function: { name: 'look', arguments: '{"at":' } }] } }] },
      { choices: [{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: '"sky"}' } }] } }] },
      { choices: [], usage: null },
    ]);
    const expected = o200k('Hello, ') + o200k('wonderful world') + o200k('look') + o200k('{"at":') + o200k('"sky"}');
    assert.equal(await relayed(bytes).completionTokens('gpt-4o'), expected);
    const split = [bytes.subarray(0, 7), bytes.subarray(7, 100), bytes.subarray(100)];
    assert.equal(await relayed(...split).completionTokens('gpt-4o'), expected);
  });

  it('counts Responses text deltas but not audio deltas, and Anthropic text and tool-input deltas', async () => {
    const responses = sse([
      { type: 'response.created', response: { id: 'r' } },
      { type: 'response.output_text.delta', delta: 'Hi there' },
      { type: 'response.output_audio.delta', delta: 'QUFBQUFBQUFB' },
      { type: 'response.function_call_arguments.delta', delta: '{"a":1}' },
    ]);
    assert.equal(await relayed(responses).completionTokens('gpt-4o'), o200k('Hi there') + o200k('{"a":1}'));
    const anthropic = sse([
      { type: 'message_start', message: { usage: { input_tokens: 12, output_tokens: 1 } } },
      { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Bonjour' } },
      { type: 'content_block_delta', index: 1, delta: { type: 'input_json_delta', partial_json: '{"q":' } },
      { type: 'content_block_delta', index: 2, delta: { type: 'thinking_delta', thinking: 'hmm' } },
    ]);
    assert.equal(await relayed(anthropic).completionTokens('claude-x'), o200k('Bonjour') + o200k('{"q":') + o200k('hmm'));
  });

  it('extrapolates past the bytes it keeps', async () => {
    const chunk = sse([{ choices: [{ index: 0, delta: { content: 'word '.repeat(1000) } }] }]);
    const one = await relayed(chunk).completionTokens('gpt-4o');
    const many = relayed(...Array.from({ length: 400 }, () => chunk));
    assert.equal(many.bytes, 400 * chunk.length);
    const estimate = await many.completionTokens('gpt-4o');
    assert.ok(Math.abs(estimate - 400 * one) / (400 * one) < 0.01, `${estimate} for about ${400 * one}`);
  });

  it('counts a long stream from a sample of whole events, cut at any byte, and extrapolates by size', async () => {
    // Events of uneven sizes, relayed in pieces that end inside events, far past the sample.
    const contents = Array.from({ length: 400 }, (_, i) => `${'token '.repeat(200 + ((i * 397) % 3000))}${i}`);
    const bytes = Buffer.from(contents.map((content) => `data: ${JSON.stringify({ choices: [{ index: 0, delta: { content } }] })}\r\n\r\n`).join(''));
    const pieces = Array.from({ length: Math.ceil(bytes.length / 4093) }, (_, i) => bytes.subarray(i * 4093, (i + 1) * 4093));
    const stream = relayed(...pieces);
    assert.equal(stream.bytes, bytes.length);
    const exact = contents.reduce((sum, content) => sum + o200k(content), 0);
    const estimate = await stream.completionTokens('gpt-4o');
    assert.ok(Math.abs(estimate - exact) / exact < 0.01, `${estimate} for ${exact}`);
  });

  it('keeps a first event larger than the sample whole, so a stream of such events is still counted', async () => {
    const event = sse([{ choices: [{ index: 0, delta: { content: 'word '.repeat(40_000) } }] }]);
    const one = await relayed(event).completionTokens('gpt-4o');
    const pieces = Array.from({ length: 8 }, () => event).flatMap((e) => Array.from({ length: Math.ceil(e.length / 16_384) }, (_, i) => e.subarray(i * 16_384, (i + 1) * 16_384)));
    const estimate = await relayed(...pieces).completionTokens('gpt-4o');
    assert.ok(Math.abs(estimate - 8 * one) / (8 * one) < 0.01, `${estimate} for about ${8 * one}`);
  });

  it('keeps what the provider did report where it is larger, and says nothing of cached tokens it did not report', async () => {
    const stream = relayed(sse([{ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Bonjour' } }]));
    const request = { model: 'claude-x', messages: [{ role: 'user', content: 'Hi' }] };
    const usage = await estimateStreamUsage({ model: 'claude-x', request, relayed: stream, reported: { promptTokens: 500, completionTokens: 1, totalTokens: 501, cachedPromptTokens: 200 } });
    assert.deepEqual(usage, { promptTokens: 500, completionTokens: o200k('Bonjour'), totalTokens: 500 + o200k('Bonjour'), cachedPromptTokens: 200 });
    const none = await estimateStreamUsage({ model: 'claude-x', request, relayed: new RelayedStream(), reported: undefined });
    assert.deepEqual(none, { promptTokens: o200k('Hi') + 3 + 3, completionTokens: 0, totalTokens: o200k('Hi') + 6 });
  });
});
