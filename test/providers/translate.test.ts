import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import { chatToMessagesRequest, messagesToChatRequest } from '../../src/providers/translate/anthropic-request.ts';
import { chatToMessagesResponse, errorToAnthropic, errorToOpenAI, messagesToChatResponse } from '../../src/providers/translate/anthropic-response.ts';
import { ChatToMessagesStream, MessagesToChatStream } from '../../src/providers/translate/anthropic-stream.ts';
import { SseUsageTap } from '../../src/providers/stream-usage.ts';
import { relay, type UpstreamBody } from '../../src/providers/upstream.ts';
import { sseData, sseEvents } from './helpers.ts';

test('chat request -> messages request (system, tools, tool results, images, params)', () => {
  const out = chatToMessagesRequest({
    model: 'claude', max_completion_tokens: 99, temperature: 0.2, top_p: 0.9, stop: ['a', 'b'], user: 'u1', stream: true,
    stream_options: { include_usage: true }, parallel_tool_calls: false, tool_choice: 'required',
    tools: [{ type: 'function', function: { name: 'get', description: 'd', parameters: { type: 'object', properties: { q: { type: 'string' } } } } }],
    messages: [
      { role: 'system', content: 'S1' },
      { role: 'developer', content: [{ type: 'text', text: 'S2' }] },
      { role: 'user', content: [{ type: 'text', text: 'look' }, { type: 'image_url', image_url: { url: 'data:image/png;base64,AAA' } }] },
      { role: 'assistant', content: null, tool_calls: [{ id: 't1', type: 'function', function: { name: 'get', arguments: '{"q":"x"}' } }] },
      { role: 'tool', tool_call_id: 't1', content: 'result' },
      { role: 'user', content: 'thanks' },
    ],
  });
  assert.deepEqual(out, {
    model: 'claude',
    system: 'S1\n\nS2',
    max_tokens: 99,
    temperature: 0.2,
    top_p: 0.9,
    stop_sequences: ['a', 'b'],
    stream: true,
    tools: [{ name: 'get', description: 'd', input_schema: { type: 'object', properties: { q: { type: 'string' } } } }],
    tool_choice: { type: 'any', disable_parallel_tool_use: true },
    metadata: { user_id: 'u1' },
    messages: [
      { role: 'user', content: [{ type: 'text', text: 'look' }, { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AAA' } }] },
      { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'get', input: { q: 'x' } }] },
      // tool result and the next user turn merged into one user turn
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: 'result' }, { type: 'text', text: 'thanks' }] },
    ],
  });
});

test('max_tokens defaults to 4096', () => {
  assert.equal(chatToMessagesRequest({ model: 'm', messages: [] }).max_tokens, 4096);
});

test('messages request -> chat request', () => {
  const out = messagesToChatRequest({
    model: 'gpt', max_tokens: 10, system: [{ type: 'text', text: 'sys' }], stop_sequences: ['X'], stream: true,
    tools: [{ name: 'get', description: 'd', input_schema: { type: 'object' } }], tool_choice: { type: 'tool', name: 'get' },
    metadata: { user_id: 'u' },
    messages: [
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: [{ type: 'text', text: 'calling' }, { type: 'tool_use', id: 't1', name: 'get', input: { a: 1 } }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: [{ type: 'text', text: 'r' }] }, { type: 'text', text: 'go on' }] },
    ],
  });
  assert.deepEqual(out, {
    model: 'gpt', max_tokens: 10, stop: ['X'], stream: true, stream_options: { include_usage: true },
    tools: [{ type: 'function', function: { name: 'get', description: 'd', parameters: { type: 'object' } } }],
    tool_choice: { type: 'function', function: { name: 'get' } },
    user: 'u',
    messages: [
      { role: 'system', content: 'sys' },
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: 'calling', tool_calls: [{ id: 't1', type: 'function', function: { name: 'get', arguments: '{"a":1}' } }] },
      { role: 'tool', tool_call_id: 't1', content: 'r' },
      { role: 'user', content: 'go on' },
    ],
  });
});

test('responses both ways, finish reasons, usage with cache tokens', () => {
  const chat = messagesToChatResponse({
    id: 'msg_1', model: 'claude', stop_reason: 'tool_use',
    content: [{ type: 'text', text: 'ok' }, { type: 'tool_use', id: 't', name: 'f', input: { x: 1 } }],
    usage: { input_tokens: 5, output_tokens: 7, cache_read_input_tokens: 3 },
  }, 123);
  assert.deepEqual(chat, {
    id: 'msg_1', object: 'chat.completion', created: 123, model: 'claude',
    choices: [{ index: 0, logprobs: null, finish_reason: 'tool_calls', message: { role: 'assistant', content: 'ok', refusal: null, tool_calls: [{ id: 't', type: 'function', function: { name: 'f', arguments: '{"x":1}' } }] } }],
    usage: { prompt_tokens: 8, completion_tokens: 7, total_tokens: 15 },
  });
  const msg = chatToMessagesResponse({
    id: 'c1', model: 'gpt', choices: [{ message: { role: 'assistant', content: 'hey', tool_calls: [{ id: 't', function: { name: 'f', arguments: '{"y":2}' } }] }, finish_reason: 'length' }],
    usage: { prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 },
  });
  assert.deepEqual(msg, {
    id: 'c1', type: 'message', role: 'assistant', model: 'gpt', stop_sequence: null, stop_reason: 'max_tokens',
    content: [{ type: 'text', text: 'hey' }, { type: 'tool_use', id: 't', name: 'f', input: { y: 2 } }],
    usage: { input_tokens: 1, output_tokens: 2 },
  });
});

test('error bodies both ways', () => {
  const oa = JSON.parse(errorToOpenAI(Buffer.from('{"type":"error","error":{"type":"rate_limit_error","message":"slow"}}'), 429).toString());
  assert.deepEqual(oa, { error: { message: 'slow', type: 'rate_limit_error', param: null, code: null } });
  const an = JSON.parse(errorToAnthropic(Buffer.from('{"error":{"message":"bad","type":"server_error"}}'), 503).toString());
  assert.deepEqual(an, { type: 'error', error: { type: 'api_error', message: 'bad' } });
  assert.match(JSON.parse(errorToOpenAI(Buffer.from('not json'), 502).toString()).error.message, /not json/);
});

const ANTHROPIC_STREAM = [
  { type: 'message_start', message: { id: 'msg_1', model: 'claude', usage: { input_tokens: 10, output_tokens: 1 } } },
  { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } },
  { type: 'ping' },
  { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Hi' } },
  { type: 'content_block_stop', index: 0 },
  { type: 'content_block_start', index: 1, content_block: { type: 'tool_use', id: 'toolu_1', name: 'f', input: {} } },
  { type: 'content_block_delta', index: 1, delta: { type: 'input_json_delta', partial_json: '{"a":' } },
  { type: 'content_block_delta', index: 1, delta: { type: 'input_json_delta', partial_json: '1}' } },
  { type: 'content_block_stop', index: 1 },
  { type: 'message_delta', delta: { stop_reason: 'tool_use', stop_sequence: null }, usage: { output_tokens: 12 } },
  { type: 'message_stop' },
];

test('Anthropic stream -> chat chunks', () => {
  const t = new MessagesToChatStream({ model: 'fallback', includeUsage: true, created: 1 });
  const text = ANTHROPIC_STREAM.map((e) => t.push(e)).join('');
  const data = sseData(text);
  assert.equal(data.at(-1), '[DONE]');
  const chunks = data.slice(0, -1) as Array<Record<string, unknown>>;
  const deltas = chunks.map((c) => (c.choices as Array<{ delta: unknown; finish_reason: unknown }>)[0]);
  assert.deepEqual(deltas.map((d) => d?.delta), [
    { role: 'assistant', content: '' },
    { content: 'Hi' },
    { tool_calls: [{ index: 0, id: 'toolu_1', type: 'function', function: { name: 'f', arguments: '' } }] },
    { tool_calls: [{ index: 0, function: { arguments: '{"a":' } }] },
    { tool_calls: [{ index: 0, function: { arguments: '1}' } }] },
    {},
    undefined,
  ]);
  assert.equal(deltas[5]?.finish_reason, 'tool_calls');
  assert.deepEqual(chunks.at(-1)?.usage, { prompt_tokens: 10, completion_tokens: 12, total_tokens: 22 });
  assert.equal(chunks[0]?.model, 'claude');
  assert.deepEqual(t.usage(), { promptTokens: 10, completionTokens: 12, totalTokens: 22 });
});

test('Anthropic stream without message_stop never emits [DONE]', () => {
  const t = new MessagesToChatStream({ model: 'm', includeUsage: false });
  const text = ANTHROPIC_STREAM.slice(0, 4).map((e) => t.push(e)).join('');
  assert.doesNotMatch(text, /DONE/);
});

test('chat chunks -> Anthropic stream', () => {
  const base = { id: 'c1', object: 'chat.completion.chunk', model: 'gpt' };
  const chunks = [
    { ...base, choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] },
    { ...base, choices: [{ index: 0, delta: { content: 'Hel' }, finish_reason: null }] },
    { ...base, choices: [{ index: 0, delta: { content: 'lo' }, finish_reason: null }] },
    { ...base, choices: [{ index: 0, delta: { tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'f', arguments: '' } }] }, finish_reason: null }] },
    { ...base, choices: [{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: '{}' } }] }, finish_reason: null }] },
    { ...base, choices: [{ index: 0, delta: {}, finish_reason: 'tool_calls' }] },
    { ...base, choices: [], usage: { prompt_tokens: 4, completion_tokens: 6, total_tokens: 10 } },
  ];
  const t = new ChatToMessagesStream({ model: 'x' });
  const text = chunks.map((c) => t.push(c)).join('') + t.finish() + t.finish();
  const events = sseEvents(text);
  assert.deepEqual(events.map((e) => e.event), [
    'message_start', 'content_block_start', 'content_block_delta', 'content_block_delta', 'content_block_stop',
    'content_block_start', 'content_block_delta', 'content_block_stop', 'message_delta', 'message_stop',
  ]);
  assert.ok(events.every((e) => e.event === e.data.type));
  assert.deepEqual(events[5]?.data.content_block, { type: 'tool_use', id: 'call_1', name: 'f', input: {} });
  assert.deepEqual(events[8]?.data, { type: 'message_delta', delta: { stop_reason: 'tool_use', stop_sequence: null }, usage: { input_tokens: 4, output_tokens: 6 } });
  assert.deepEqual(t.usage(), { promptTokens: 4, completionTokens: 6, totalTokens: 10 });
});

test('SseUsageTap strips only the usage-only chunk, even when split across network chunks', async () => {
  const text = 'data: {"choices":[{"delta":{"content":"a"}}],"usage":null}\r\n\r\n'
    + 'data: {"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}\r\n\r\n'
    + 'data: [DONE]\r\n\r\n';
  const through = async (tap: SseUsageTap, size: number): Promise<string> => {
    const pieces: Buffer[] = [];
    for (let i = 0; i < text.length; i += size) pieces.push(Buffer.from(text.slice(i, i + size)));
    return (await buffer(relay(Readable.from(pieces) as unknown as UpstreamBody, (e) => e, tap))).toString();
  };
  for (const size of [1, 7, 1000]) {
    const tap = new SseUsageTap({ stripChatUsageChunk: true });
    assert.equal(await through(tap, size), 'data: {"choices":[{"delta":{"content":"a"}}],"usage":null}\r\n\r\ndata: [DONE]\r\n\r\n');
    assert.deepEqual(tap.usage(), { promptTokens: 1, completionTokens: 2, totalTokens: 3 });
  }
  const passthrough = new SseUsageTap();
  assert.equal(await through(passthrough, 7), text, 'passed on unchanged without stripping');
  assert.equal(passthrough.usage()?.totalTokens, 3);
});
