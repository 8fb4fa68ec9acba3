import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Json } from '../../src/providers/translate/json.ts';
import { messagesToChat } from '../../src/providers/translate/messages-to-chat.ts';
import { ChatToResponsesStream, chatToResponsesResponse, responsesToChatRequest } from '../../src/providers/translate/responses.ts';
import { unsupportedPolicy } from '../../src/providers/translate/unsupported.ts';
import { UnsupportedParameterError } from '../../src/providers/types.ts';
import { sseEvents } from './helpers.ts';

const refuse = unsupportedPolicy({ provider: 'p', type: 't', drop: false });

describe('Responses request -> chat request', () => {
  it('input as a string, instructions as the system message, the sampling settings', () => {
    assert.deepEqual(
      responsesToChatRequest({ model: 'm', input: 'hi', instructions: 'be kind', max_output_tokens: 9, temperature: 0.1, top_p: 0.2, user: 'u', metadata: { a: '1' }, store: false }, refuse),
      { model: 'm', messages: [{ role: 'system', content: 'be kind' }, { role: 'user', content: 'hi' }], max_completion_tokens: 9, temperature: 0.1, top_p: 0.2, user: 'u' },
    );
  });

  it('input items: messages with parts, function calls joined to the assistant turn, their outputs as tool messages', () => {
    const out = responsesToChatRequest({
      model: 'm',
      input: [
        { role: 'developer', content: 'rules' },
        { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'look' }, { type: 'input_image', image_url: 'data:image/png;base64,AA', detail: 'low' }] },
        { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'calling' }] },
        { type: 'function_call', call_id: 'c1', name: 'f', arguments: '{"a":1}' },
        { type: 'function_call', call_id: 'c2', name: 'g', arguments: '{}' },
        { type: 'reasoning', id: 'rs_1', summary: [] },
        { type: 'function_call_output', call_id: 'c1', output: 'one' },
        { type: 'function_call_output', call_id: 'c2', output: [{ type: 'input_text', text: 'two' }] },
      ],
    }, refuse);
    assert.deepEqual(out.messages, [
      { role: 'developer', content: 'rules' },
      { role: 'user', content: [{ type: 'text', text: 'look' }, { type: 'image_url', image_url: { url: 'data:image/png;base64,AA', detail: 'low' } }] },
      { role: 'assistant', content: 'calling', tool_calls: [
        { id: 'c1', type: 'function', function: { name: 'f', arguments: '{"a":1}' } },
        { id: 'c2', type: 'function', function: { name: 'g', arguments: '{}' } },
      ] },
      { role: 'tool', tool_call_id: 'c1', content: 'one' },
      { role: 'tool', tool_call_id: 'c2', content: 'two' },
    ]);
  });

  it('tools, tool_choice, text.format, reasoning effort, streaming', () => {
    const out = responsesToChatRequest({
      model: 'm', input: 'x', stream: true, parallel_tool_calls: true,
      tools: [{ type: 'function', name: 'f', description: 'd', parameters: { type: 'object' }, strict: true }],
      tool_choice: { type: 'function', name: 'f' },
      text: { format: { type: 'json_schema', name: 'out', schema: { type: 'object' }, strict: true } },
      reasoning: { effort: 'low' },
    }, refuse);
    assert.deepEqual(out, {
      model: 'm', messages: [{ role: 'user', content: 'x' }], parallel_tool_calls: true,
      tools: [{ type: 'function', function: { name: 'f', description: 'd', parameters: { type: 'object' }, strict: true } }],
      tool_choice: { type: 'function', function: { name: 'f' } },
      response_format: { type: 'json_schema', json_schema: { name: 'out', schema: { type: 'object' }, strict: true } },
      reasoning_effort: 'low',
      stream: true, stream_options: { include_usage: true },
    });
    assert.deepEqual(responsesToChatRequest({ model: 'm', input: 'x', text: { format: { type: 'json_object' } }, tool_choice: 'required' }, refuse).response_format, { type: 'json_object' });
  });

  const refused: Array<[Json, string]> = [
    [{ previous_response_id: 'resp_1' }, 'previous_response_id'],
    [{ conversation: 'conv_1' }, 'conversation'],
    [{ store: true }, 'store'],
    [{ background: true }, 'background'],
    [{ include: ['reasoning.encrypted_content'] }, 'include'],
    [{ truncation: 'auto' }, 'truncation'],
    [{ top_logprobs: 3 }, 'top_logprobs'],
    [{ prompt: { id: 'pmpt_1' } }, 'prompt'],
    [{ tools: [{ type: 'web_search' }] }, 'tools[0].type'],
    [{ tool_choice: { type: 'file_search' } }, 'tool_choice'],
    [{ reasoning: { effort: 'low', summary: 'auto' } }, 'reasoning.summary'],
    [{ text: { format: { type: 'text' }, verbosity: 'low' } }, 'text.verbosity'],
    [{ input: [{ type: 'item_reference', id: 'x' }] }, 'input[0].type'],
    [{ input: [{ role: 'user', content: [{ type: 'input_image', file_id: 'file-1' }] }] }, 'input[0].content[0].file_id'],
    [{ input: [{ role: 'user', content: [{ type: 'input_file', file_id: 'file-1' }] }] }, 'input[0].content[0].file_id'],
  ];
  for (const [extra, param] of refused) {
    it(`refuses ${param}`, () => {
      assert.throws(() => responsesToChatRequest({ model: 'm', input: 'x', ...extra }, refuse), (e: unknown) => e instanceof UnsupportedParameterError && e.param === param);
    });
  }
});

describe('chat -> Responses', () => {
  const chat = {
    id: 'chatcmpl-1', model: 'm',
    choices: [{ index: 0, finish_reason: 'tool_calls', message: { role: 'assistant', content: 'let me check', tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'f', arguments: '{"a":1}' } }] } }],
    usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15, prompt_tokens_details: { cached_tokens: 4 }, completion_tokens_details: { reasoning_tokens: 2 } },
  };

  it('a completion as a Response: a message item, a function_call item, the usage, the request echoed', () => {
    const res = chatToResponsesResponse(chat, { instructions: 'i', temperature: 0.5, tools: [] }, 5);
    assert.match(String(res.id), /^resp_/);
    const output = res.output as Json[];
    assert.deepEqual(output.map((o) => o.type), ['message', 'function_call']);
    assert.deepEqual(output[0]?.content, [{ type: 'output_text', text: 'let me check', annotations: [], logprobs: [] }]);
    assert.deepEqual({ ...output[1], id: undefined }, { id: undefined, type: 'function_call', status: 'completed', call_id: 'call_1', name: 'f', arguments: '{"a":1}' });
    assert.deepEqual(res.usage, { input_tokens: 10, input_tokens_details: { cached_tokens: 4 }, output_tokens: 5, output_tokens_details: { reasoning_tokens: 2 }, total_tokens: 15 });
    assert.deepEqual([res.object, res.status, res.created_at, res.instructions, res.temperature], ['response', 'completed', 5, 'i', 0.5]);
  });

  it('streamed chunks as Responses events, in order, ending with response.completed and its usage', () => {
    const s = new ChatToResponsesStream({ model: 'm', request: { input: 'x' } });
    const base = { id: 'c', object: 'chat.completion.chunk', model: 'm-001' };
    const chunks: Json[] = [
      { ...base, choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] },
      { ...base, choices: [{ index: 0, delta: { content: 'Hi ' }, finish_reason: null }] },
      { ...base, choices: [{ index: 0, delta: { content: 'there' }, finish_reason: null }] },
      { ...base, choices: [{ index: 0, delta: { tool_calls: [{ index: 0, id: 'call_9', type: 'function', function: { name: 'f', arguments: '{"a"' } }] }, finish_reason: null }] },
      { ...base, choices: [{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: ':1}' } }] }, finish_reason: null }] },
      { ...base, choices: [{ index: 0, delta: {}, finish_reason: 'tool_calls' }] },
      { ...base, choices: [], usage: { prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 } },
    ];
    let text = chunks.map((c) => s.push(c)).join('');
    assert.equal(s.complete, true);
    text += s.finish();
    const events = sseEvents(text);
    assert.ok(events.every((e) => e.event === e.data.type));
    assert.deepEqual(events.map((e) => e.data.sequence_number), events.map((_, i) => i));
    assert.deepEqual(events.map((e) => e.event), [
      'response.created', 'response.in_progress',
      'response.output_item.added', 'response.content_part.added', 'response.output_text.delta', 'response.output_text.delta',
      'response.output_text.done', 'response.content_part.done', 'response.output_item.done',
      'response.output_item.added', 'response.function_call_arguments.delta', 'response.function_call_arguments.delta',
      'response.function_call_arguments.done', 'response.output_item.done',
      'response.completed',
    ]);
    const done = events.at(-1)!.data.response as Json;
    assert.equal(done.model, 'm-001');
    assert.deepEqual((done.output as Json[]).map((o) => [o.type, o.status, o.type === 'message' ? (o.content as Json[])[0]?.text : o.arguments]), [
      ['message', 'completed', 'Hi there'],
      ['function_call', 'completed', '{"a":1}'],
    ]);
    assert.deepEqual(s.usage(), { promptTokens: 3, completionTokens: 4, totalTokens: 7 });
  });

  it('a length stop ends with response.incomplete', () => {
    const s = new ChatToResponsesStream({ model: 'm', request: {} });
    s.push({ choices: [{ index: 0, delta: { content: 'cut' }, finish_reason: 'length' }] });
    const last = sseEvents(s.finish()).at(-1)!;
    assert.equal(last.event, 'response.incomplete');
    assert.deepEqual((last.data.response as Json).incomplete_details, { reason: 'max_output_tokens' });
  });
});

describe('Anthropic Messages -> chat, with what cannot be carried refused', () => {
  it('output_config: a JSON schema as response_format, effort as reasoning_effort; top_k kept', () => {
    const chat = messagesToChat({
      model: 'm', max_tokens: 5, top_k: 3, cache_control: { type: 'ephemeral' }, speed: 'standard',
      output_config: { effort: 'medium', format: { type: 'json_schema', schema: { type: 'object' } } },
      messages: [{ role: 'assistant', content: [{ type: 'thinking', thinking: 'hm', signature: 's' }, { type: 'text', text: 'ok' }] }, { role: 'user', content: 'go' }],
    }, refuse, { topK: true, reasoningEffort: true });
    assert.deepEqual(chat, {
      model: 'm', max_tokens: 5, top_k: 3, reasoning_effort: 'medium',
      messages: [{ role: 'assistant', content: 'ok' }, { role: 'user', content: 'go' }],
      response_format: { type: 'json_schema', json_schema: { name: 'output', schema: { type: 'object' } } },
    });
  });

  it('a target without top_k or reasoning effort refuses them by their Messages names; a JSON schema still goes', () => {
    const converse = { topK: false, reasoningEffort: false };
    const msg = { model: 'm', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] };
    for (const [extra, param] of [[{ top_k: 3 }, 'top_k'], [{ output_config: { effort: 'low' } }, 'output_config.effort']] as const) {
      assert.throws(
        () => messagesToChat({ ...msg, ...extra }, refuse, converse),
        (e: unknown) => e instanceof UnsupportedParameterError && e.param === param && e.code === 'unsupported_parameter' && /drop_unsupported/.test(e.message),
      );
    }
    const lenient = unsupportedPolicy({ provider: 'p', type: 't', drop: true });
    const chat = messagesToChat({ ...msg, top_k: 3, output_config: { effort: 'low', format: { type: 'json_schema', schema: { type: 'object' } } } }, lenient, converse);
    assert.equal(chat.top_k, undefined, 'dropped');
    assert.equal(chat.reasoning_effort, undefined, 'dropped');
    assert.deepEqual(chat.response_format, { type: 'json_schema', json_schema: { name: 'output', schema: { type: 'object' } } });
  });

  const refused: Array<[Json, string]> = [
    [{ thinking: { type: 'enabled', budget_tokens: 1024 } }, 'thinking'],
    [{ container: 'c' }, 'container'],
    [{ mcp_servers: [] }, 'mcp_servers'],
    [{ inference_geo: 'us' }, 'inference_geo'],
    [{ speed: 'fast' }, 'speed'],
    [{ output_config: { effort: 'max' } }, 'output_config.effort'],
    [{ tools: [{ type: 'web_search_20250305', name: 'web_search' }] }, 'tools[0].type'],
    [{ messages: [{ role: 'user', content: [{ type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: 'x' } }] }] }, 'messages[0].content[0].type'],
    [{ messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'file', file_id: 'f' } }] }] }, 'messages[0].content[0].source.type'],
    [{ messages: [{ role: 'user', content: [{ type: 'tool_result', tool_use_id: 't', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'x' } }] }] }] }, 'messages[0].content[0].content[0].type'],
  ];
  for (const [extra, param] of refused) {
    it(`refuses ${param}`, () => {
      const msg = { model: 'm', max_tokens: 5, messages: [{ role: 'user', content: 'x' }], ...extra };
      assert.throws(() => messagesToChat(msg, refuse, { topK: true, reasoningEffort: true }), (e: unknown) => e instanceof UnsupportedParameterError && e.param === param);
    });
  }
});
