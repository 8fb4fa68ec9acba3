/**
 * The chat ⇄ Converse translation table: every mapped parameter, every finish reason, usage with
 * cached tokens, and the parameters that are refused (or dropped) instead.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ChatSseWriter } from '../../src/providers/translate/chat-sse.ts';
import { chatToConverse, converseStopToFinish, converseToChat, converseUsage, ConverseToChatStream } from '../../src/providers/translate/converse.ts';
import { finishToAnthropicStop } from '../../src/providers/translate/anthropic-response.ts';
import { unsupportedPolicy } from '../../src/providers/translate/unsupported.ts';
import { UnsupportedParameterError } from '../../src/providers/types.ts';

const strict = unsupportedPolicy({ provider: 'br', type: 'bedrock', drop: false });
const user = [{ role: 'user', content: 'hi' }];
const translate = (extra: Record<string, unknown>) => chatToConverse({ model: 'm', messages: user, ...extra }, strict);

describe('chat → Converse: parameters', () => {
  const tool = { type: 'function', function: { name: 'f', description: 'does f', parameters: { type: 'object', properties: { a: { type: 'number' } } } } };
  const spec = { toolSpec: { name: 'f', description: 'does f', inputSchema: { json: tool.function.parameters } } };
  const table: Array<[string, Record<string, unknown>, Record<string, unknown>]> = [
    ['max_tokens', { max_tokens: 10 }, { inferenceConfig: { maxTokens: 10 } }],
    ['max_completion_tokens wins', { max_tokens: 10, max_completion_tokens: 20 }, { inferenceConfig: { maxTokens: 20 } }],
    ['temperature', { temperature: 0.3 }, { inferenceConfig: { temperature: 0.3 } }],
    ['top_p', { top_p: 0.8 }, { inferenceConfig: { topP: 0.8 } }],
    ['stop as a string', { stop: 'END' }, { inferenceConfig: { stopSequences: ['END'] } }],
    ['stop as a list', { stop: ['A', 'B'] }, { inferenceConfig: { stopSequences: ['A', 'B'] } }],
    ['tools', { tools: [tool] }, { toolConfig: { tools: [spec] } }],
    ['tool_choice auto', { tools: [tool], tool_choice: 'auto' }, { toolConfig: { tools: [spec], toolChoice: { auto: {} } } }],
    ['tool_choice required', { tools: [tool], tool_choice: 'required' }, { toolConfig: { tools: [spec], toolChoice: { any: {} } } }],
    ['tool_choice a function', { tools: [tool], tool_choice: { type: 'function', function: { name: 'f' } } }, { toolConfig: { tools: [spec], toolChoice: { tool: { name: 'f' } } } }],
    ['response_format text', { response_format: { type: 'text' } }, {}],
    ['response_format json_object', { response_format: { type: 'json_object' } }, { outputConfig: { textFormat: { type: 'json_schema', structure: { jsonSchema: { schema: '{"type":"object"}', name: 'json_object' } } } } }],
    ['response_format json_schema', { response_format: { type: 'json_schema', json_schema: { name: 'r', description: 'd', schema: { type: 'object' } } } }, { outputConfig: { textFormat: { type: 'json_schema', structure: { jsonSchema: { schema: '{"type":"object"}', name: 'r', description: 'd' } } } } }],
    ['user', { user: 'u-1' }, { requestMetadata: { user: 'u-1' } }],
    ['service_tier flex', { service_tier: 'flex' }, { serviceTier: { type: 'flex' } }],
    ['service_tier auto', { service_tier: 'auto' }, {}],
    ['neutral values', { n: 1, logprobs: false, presence_penalty: 0, frequency_penalty: 0, parallel_tool_calls: true, store: false, logit_bias: {}, modalities: ['text'], stream: true, stream_options: { include_usage: true } }, {}],
  ];
  for (const [name, chat, expected] of table) {
    it(name, () => assert.deepEqual(translate(chat), { messages: [{ role: 'user', content: [{ text: 'hi' }] }], ...expected }));
  }

  it('system and developer prompts, multi-turn, merged user turns, tool calls and tool results', () => {
    const out = chatToConverse({
      model: 'm',
      messages: [
        { role: 'system', content: 'S1' },
        { role: 'developer', content: [{ type: 'text', text: 'S2' }] },
        { role: 'user', content: 'q1' },
        { role: 'assistant', content: 'a1' },
        { role: 'user', content: [{ type: 'text', text: 'q2' }, { type: 'image_url', image_url: { url: 'data:image/jpeg;base64,/9j/' } }] },
        { role: 'assistant', content: null, tool_calls: [{ id: 't1', type: 'function', function: { name: 'f', arguments: '{"a":1}' } }, { id: 't2', type: 'function', function: { name: 'f', arguments: '{"a":2}' } }] },
        { role: 'tool', tool_call_id: 't1', content: 'r1' },
        { role: 'tool', tool_call_id: 't2', content: [{ type: 'text', text: 'r2' }] },
        { role: 'user', content: 'q3' },
      ],
    }, strict);
    assert.deepEqual(out.system, [{ text: 'S1' }, { text: 'S2' }]);
    assert.deepEqual(out.messages, [
      { role: 'user', content: [{ text: 'q1' }] },
      { role: 'assistant', content: [{ text: 'a1' }] },
      { role: 'user', content: [{ text: 'q2' }, { image: { format: 'jpeg', source: { bytes: Buffer.from('/9j/', 'base64') } } }] },
      { role: 'assistant', content: [{ toolUse: { toolUseId: 't1', name: 'f', input: { a: 1 } } }, { toolUse: { toolUseId: 't2', name: 'f', input: { a: 2 } } }] },
      { role: 'user', content: [{ toolResult: { toolUseId: 't1', content: [{ text: 'r1' }] } }, { toolResult: { toolUseId: 't2', content: [{ text: 'r2' }] } }, { text: 'q3' }] },
    ]);
  });
});

describe('chat → Converse: what is refused', () => {
  const refused: Array<[string, Record<string, unknown>, string]> = [
    ['logprobs', { logprobs: true }, 'logprobs'],
    ['top_logprobs', { top_logprobs: 2 }, 'top_logprobs'],
    ['n > 1', { n: 3 }, 'n'],
    ['seed', { seed: 1 }, 'seed'],
    ['presence_penalty', { presence_penalty: 1 }, 'presence_penalty'],
    ['frequency_penalty', { frequency_penalty: 1 }, 'frequency_penalty'],
    ['logit_bias', { logit_bias: { 50256: -100 } }, 'logit_bias'],
    ['parallel_tool_calls false', { parallel_tool_calls: false }, 'parallel_tool_calls'],
    ['tool_choice none', { tools: [{ type: 'function', function: { name: 'f' } }], tool_choice: 'none' }, 'tool_choice'],
    ['an audio modality', { modalities: ['text', 'audio'] }, 'modalities'],
    ['an unknown parameter', { reasoning_effort: 'high' }, 'reasoning_effort'],
    ['an unknown response format', { response_format: { type: 'grammar' } }, 'response_format'],
    ['service_tier scale', { service_tier: 'scale' }, 'service_tier'],
    ['an audio part', { messages: [{ role: 'user', content: [{ type: 'input_audio', input_audio: { data: '', format: 'wav' } }] }] }, 'messages[0].content[0]'],
    ['an image link', { messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'http://x/y.png' } }] }] }, 'messages[0].content[0].image_url'],
    ['an image format Converse lacks', { messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'data:image/tiff;base64,AAAA' } }] }] }, 'messages[0].content[0].image_url'],
  ];
  for (const [name, chat, param] of refused) {
    it(name, () => {
      assert.throws(() => translate(chat), (err: unknown) => err instanceof UnsupportedParameterError && err.param === param && /bedrock/i.test(err.message));
    });
  }

  it('under drop_unsupported the parameters are left out and each name is logged once', () => {
    const logged: unknown[] = [];
    const drop = unsupportedPolicy({ provider: 'br', type: 'bedrock', drop: true, context: { warn: (fields) => logged.push(fields) } });
    const once = chatToConverse({ model: 'm', messages: user, seed: 1, logprobs: true, temperature: 0.5 }, drop);
    chatToConverse({ model: 'm', messages: user, seed: 2 }, drop);
    assert.deepEqual(once, { messages: [{ role: 'user', content: [{ text: 'hi' }] }], inferenceConfig: { temperature: 0.5 } });
    assert.deepEqual(logged, [{ provider: 'br', param: 'seed' }, { provider: 'br', param: 'logprobs' }]);
    // Content that cannot be sent at all is refused whatever the setting: leaving an image out would change the question.
    assert.throws(() => chatToConverse({ model: 'm', messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'http://x/y.png' } }] }] }, drop), UnsupportedParameterError);
  });
});

describe('Converse → chat', () => {
  const finishes: Array<[string, string, string]> = [
    ['end_turn', 'stop', 'end_turn'],
    ['stop_sequence', 'stop', 'end_turn'],
    ['max_tokens', 'length', 'max_tokens'],
    ['model_context_window_exceeded', 'length', 'max_tokens'],
    ['tool_use', 'tool_calls', 'tool_use'],
    ['content_filtered', 'content_filter', 'refusal'],
    ['guardrail_intervened', 'content_filter', 'refusal'],
    ['malformed_model_output', 'stop', 'end_turn'],
    ['malformed_tool_use', 'stop', 'end_turn'],
  ];
  for (const [stop, finish, anthropic] of finishes) {
    it(`stopReason ${stop} → finish_reason ${finish} (Anthropic ${anthropic})`, () => {
      assert.equal(converseStopToFinish(stop), finish);
      assert.equal(finishToAnthropicStop(converseStopToFinish(stop)), anthropic);
    });
  }

  it('usage: cache reads and writes count as prompt tokens, reads reported as cached', () => {
    assert.deepEqual(converseUsage({ inputTokens: 10, outputTokens: 5, totalTokens: 35, cacheReadInputTokens: 15, cacheWriteInputTokens: 5 }), { promptTokens: 30, completionTokens: 5, totalTokens: 35, cachedPromptTokens: 15 });
    assert.deepEqual(converseUsage({ inputTokens: 10, outputTokens: 5, totalTokens: 15 }), { promptTokens: 10, completionTokens: 5, totalTokens: 15 });
  });

  it('an answer with text and tool calls', () => {
    const chat = converseToChat({
      output: { message: { role: 'assistant', content: [{ text: 'let me see' }, { toolUse: { toolUseId: 't', name: 'f', input: { a: 1 } } }] } },
      stopReason: 'tool_use', usage: { inputTokens: 3, outputTokens: 4, totalTokens: 7, cacheReadInputTokens: 2 }, metrics: { latencyMs: 1 },
    }, { id: 'chatcmpl-1', model: 'm', created: 5 });
    assert.deepEqual(chat, {
      id: 'chatcmpl-1', object: 'chat.completion', created: 5, model: 'm',
      choices: [{ index: 0, message: { role: 'assistant', content: 'let me see', refusal: null, tool_calls: [{ id: 't', type: 'function', function: { name: 'f', arguments: '{"a":1}' } }] }, logprobs: null, finish_reason: 'tool_calls' }],
      usage: { prompt_tokens: 5, completion_tokens: 4, total_tokens: 9, prompt_tokens_details: { cached_tokens: 2 } },
    });
  });

  it('stream events → chunks: role, text, tool call start and argument deltas, finish, then the usage; as chat SSE the usage only when asked', () => {
    const events = [
      { messageStart: { role: 'assistant' as const } },
      { contentBlockDelta: { contentBlockIndex: 0, delta: { text: 'hi' } } },
      { contentBlockStart: { contentBlockIndex: 1, start: { toolUse: { toolUseId: 't', name: 'f' } } } },
      { contentBlockDelta: { contentBlockIndex: 1, delta: { toolUse: { input: '{"a"' } } } },
      { contentBlockDelta: { contentBlockIndex: 1, delta: { toolUse: { input: ':1}' } } } },
      { contentBlockStop: { contentBlockIndex: 1 } },
      { messageStop: { stopReason: 'tool_use' as const } },
      { metadata: { usage: { inputTokens: 2, outputTokens: 3, totalTokens: 5 }, metrics: { latencyMs: 1 } } },
    ];
    const usageChunk = { id: 'c', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [], usage: { prompt_tokens: 2, completion_tokens: 3, total_tokens: 5 } };
    for (const includeUsage of [false, true]) {
      const t = new ConverseToChatStream({ id: 'c', model: 'm', created: 1 });
      const chunks = events.flatMap((e) => t.push(e));
      assert.ok(t.complete);
      const deltas = chunks.map((c) => (c.choices as Array<{ delta: unknown; finish_reason: unknown }>)[0]);
      assert.deepEqual(deltas.map((d) => d?.delta), [
        { role: 'assistant', content: '' },
        { content: 'hi' },
        { tool_calls: [{ index: 0, id: 't', type: 'function', function: { name: 'f', arguments: '' } }] },
        { tool_calls: [{ index: 0, function: { arguments: '{"a"' } }] },
        { tool_calls: [{ index: 0, function: { arguments: ':1}' } }] },
        {},
      ]);
      assert.equal(deltas.at(-1)?.finish_reason, 'tool_calls');
      assert.deepEqual(t.usage(), { promptTokens: 2, completionTokens: 3, totalTokens: 5 });
      assert.deepEqual(t.end(), [usageChunk]);
      const writer = new ChatSseWriter({ includeUsage });
      const sse = [...chunks, ...t.end()].map((c) => writer.push(c)).join('') + writer.finish();
      const written = sse.split('\n\n').filter((l) => l.startsWith('data: ') && l !== 'data: [DONE]').map((l) => JSON.parse(l.slice(6)) as Record<string, unknown>);
      assert.ok(sse.endsWith('data: [DONE]\n\n'));
      assert.deepEqual(written, includeUsage ? [...chunks.map((c) => ({ ...c, usage: null })), usageChunk] : chunks);
    }
  });

  it('a stream that never stopped is not complete and ends with nothing', () => {
    const t = new ConverseToChatStream({ id: 'c', model: 'm', created: 1 });
    t.push({ messageStart: { role: 'assistant' } });
    t.push({ contentBlockDelta: { contentBlockIndex: 0, delta: { text: 'par' } } });
    assert.equal(t.complete, false);
    assert.deepEqual(t.end(), []);
  });
});
