import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { chatToMessagesResponse } from '../../src/providers/translate/anthropic-response.ts';
import { ChatToMessagesStream } from '../../src/providers/translate/anthropic-stream.ts';
import { ChatSseWriter } from '../../src/providers/translate/chat-sse.ts';
import { embeddingsResponse, readEmbeddingsRequest } from '../../src/providers/translate/embeddings.ts';
import { geminiEmbedRequest, readVertexPredict, vertexPredictBody } from '../../src/providers/translate/gemini-embeddings.ts';
import { chatToGenerateContent, signatureOfToolCallId, toolCallId } from '../../src/providers/translate/gemini-request.ts';
import { generateContentToChat, geminiFinishToChat, geminiUsageToChat, googleErrorToOpenAI } from '../../src/providers/translate/gemini-response.ts';
import { GeminiToChatStream } from '../../src/providers/translate/gemini-stream.ts';
import type { Json } from '../../src/providers/translate/json.ts';
import { chatToResponsesResponse } from '../../src/providers/translate/responses.ts';
import { unsupportedPolicy } from '../../src/providers/translate/unsupported.ts';
import { UnsupportedParameterError } from '../../src/providers/types.ts';
import { normalizeUsage } from '../../src/providers/usage.ts';
import { sseEvents } from './helpers.ts';

const refuse = unsupportedPolicy({ provider: 'gem', type: 'gemini', drop: false, context: { warn: () => assert.fail('nothing is dropped') } });
const user = [{ role: 'user', content: 'hi' }];
const translate = (extra: Json): Json => chatToGenerateContent({ model: 'm', messages: user, ...extra }, refuse);

describe('chat -> Gemini generateContent: every mapped parameter', () => {
  const rows: Array<[string, Json, Json]> = [
    ['temperature', { temperature: 0.2 }, { generationConfig: { temperature: 0.2 } }],
    ['top_p', { top_p: 0.8 }, { generationConfig: { topP: 0.8 } }],
    ['top_k (from Anthropic)', { top_k: 7 }, { generationConfig: { topK: 7 } }],
    ['max_tokens', { max_tokens: 12 }, { generationConfig: { maxOutputTokens: 12 } }],
    ['max_completion_tokens wins', { max_tokens: 12, max_completion_tokens: 34 }, { generationConfig: { maxOutputTokens: 34 } }],
    ['stop as a string', { stop: 'END' }, { generationConfig: { stopSequences: ['END'] } }],
    ['stop as a list', { stop: ['a', 'b'] }, { generationConfig: { stopSequences: ['a', 'b'] } }],
    ['n', { n: 3 }, { generationConfig: { candidateCount: 3 } }],
    ['n: 1 is the default', { n: 1 }, {}],
    ['presence_penalty', { presence_penalty: 0.5 }, { generationConfig: { presencePenalty: 0.5 } }],
    ['frequency_penalty', { frequency_penalty: -0.5 }, { generationConfig: { frequencyPenalty: -0.5 } }],
    ['seed', { seed: 42 }, { generationConfig: { seed: 42 } }],
    ['response_format text', { response_format: { type: 'text' } }, {}],
    ['response_format json_object', { response_format: { type: 'json_object' } }, { generationConfig: { responseMimeType: 'application/json' } }],
    [
      'response_format json_schema',
      { response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object' }, strict: true } } },
      { generationConfig: { responseMimeType: 'application/json', responseJsonSchema: { type: 'object' } } },
    ],
    ['reasoning_effort none', { reasoning_effort: 'none' }, { generationConfig: { thinkingConfig: { thinkingBudget: 0 } } }],
    ['reasoning_effort low', { reasoning_effort: 'low' }, { generationConfig: { thinkingConfig: { thinkingBudget: 1024 } } }],
    ['reasoning_effort medium', { reasoning_effort: 'medium' }, { generationConfig: { thinkingConfig: { thinkingBudget: 8192 } } }],
    ['reasoning_effort high', { reasoning_effort: 'high' }, { generationConfig: { thinkingConfig: { thinkingBudget: 24576 } } }],
    [
      'tools',
      { tools: [{ type: 'function', function: { name: 'f', description: 'does f', parameters: { type: 'object', properties: { a: { type: 'integer' } } }, strict: true } }] },
      { tools: [{ functionDeclarations: [{ name: 'f', description: 'does f', parametersJsonSchema: { type: 'object', properties: { a: { type: 'integer' } } } }] }] },
    ],
    ['tool_choice auto', { tools: [{ type: 'function', function: { name: 'f' } }], tool_choice: 'auto' }, { tools: [{ functionDeclarations: [{ name: 'f' }] }], toolConfig: { functionCallingConfig: { mode: 'AUTO' } } }],
    ['tool_choice none', { tools: [{ type: 'function', function: { name: 'f' } }], tool_choice: 'none' }, { tools: [{ functionDeclarations: [{ name: 'f' }] }], toolConfig: { functionCallingConfig: { mode: 'NONE' } } }],
    ['tool_choice required', { tools: [{ type: 'function', function: { name: 'f' } }], tool_choice: 'required' }, { tools: [{ functionDeclarations: [{ name: 'f' }] }], toolConfig: { functionCallingConfig: { mode: 'ANY' } } }],
    [
      'tool_choice one function',
      { tools: [{ type: 'function', function: { name: 'f' } }], tool_choice: { type: 'function', function: { name: 'f' } } },
      { tools: [{ functionDeclarations: [{ name: 'f' }] }], toolConfig: { functionCallingConfig: { mode: 'ANY', allowedFunctionNames: ['f'] } } },
    ],
    ['parallel_tool_calls: true is the default', { parallel_tool_calls: true }, {}],
    ['logprobs: false asks nothing', { logprobs: false }, {}],
    ['labels of a request are not sent', { user: 'u1', metadata: { a: 'b' }, store: false, safety_identifier: 's', prompt_cache_key: 'k', service_tier: 'auto' }, {}],
  ];
  for (const [name, chat, expected] of rows) {
    it(name, () => {
      assert.deepEqual(translate(chat), { contents: [{ role: 'user', parts: [{ text: 'hi' }] }], ...expected });
    });
  }

  it('system and developer messages go to systemInstruction; turns alternate, consecutive ones merged', () => {
    const out = chatToGenerateContent({
      messages: [
        { role: 'system', content: 'rule one' },
        { role: 'developer', content: [{ type: 'text', text: 'rule two' }] },
        { role: 'user', content: 'a' },
        { role: 'user', content: [{ type: 'text', text: 'b' }] },
        { role: 'assistant', content: 'c' },
        { role: 'assistant', content: [{ type: 'text', text: 'd' }], tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'f', arguments: '{"x":1}' } }] },
        { role: 'tool', tool_call_id: 'call_1', content: [{ type: 'text', text: 'plain words' }] },
        { role: 'user', content: 'e' },
      ],
    }, refuse);
    assert.deepEqual(out, {
      systemInstruction: { parts: [{ text: 'rule one' }, { text: 'rule two' }] },
      contents: [
        { role: 'user', parts: [{ text: 'a' }, { text: 'b' }] },
        { role: 'model', parts: [{ text: 'c' }, { text: 'd' }, { functionCall: { name: 'f', args: { x: 1 } } }] },
        { role: 'user', parts: [{ functionResponse: { name: 'f', response: { result: 'plain words' } } }, { text: 'e' }] },
      ],
    });
  });

  it('images, audio and files: data URLs inline, URLs as file data with their type', () => {
    const out = chatToGenerateContent({
      messages: [{ role: 'user', content: [
        { type: 'image_url', image_url: { url: 'data:image/webp;base64,AAAA' } },
        { type: 'image_url', image_url: { url: 'gs://bucket/photo.png' } },
        { type: 'input_audio', input_audio: { data: 'BBBB', format: 'mp3' } },
        { type: 'file', file: { file_data: 'data:application/pdf;base64,CCCC', filename: 'a.pdf' } },
      ] }],
    }, refuse);
    assert.deepEqual((out.contents as Json[])[0]?.parts, [
      { inlineData: { mimeType: 'image/webp', data: 'AAAA' } },
      { fileData: { mimeType: 'image/png', fileUri: 'gs://bucket/photo.png' } },
      { inlineData: { mimeType: 'audio/mp3', data: 'BBBB' } },
      { inlineData: { mimeType: 'application/pdf', data: 'CCCC' } },
    ]);
  });

  it('content Gemini cannot take is a 400 naming where it is, whatever drop_unsupported says', () => {
    const drop = unsupportedPolicy({ provider: 'gem', type: 'gemini', drop: true });
    const cases: Array<[Json[], string]> = [
      [[{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'https://x.test/pic' } }] }], 'messages[0].content[0].image_url'],
      [[{ role: 'user', content: [{ type: 'input_audio', input_audio: { data: 'x', format: 'flac' } }] }], 'messages[0].content[0].input_audio.format'],
      [[{ role: 'user', content: [{ type: 'file', file: { file_id: 'file-1' } }] }], 'messages[0].content[0].file.file_id'],
      [[{ role: 'tool', tool_call_id: 'nope', content: 'x' }], 'messages[0].tool_call_id'],
      [[{ role: 'assistant', tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: '[1]' } }] }], 'messages[0].tool_calls[0].function.arguments'],
      [[{ role: 'function', content: 'x' }], 'messages[0].role'],
    ];
    for (const [messages, param] of cases) {
      assert.throws(() => chatToGenerateContent({ messages }, drop), (err: unknown) => err instanceof UnsupportedParameterError && err.param === param, param);
    }
  });
});

describe('the unsupported-parameter policy', () => {
  const refused: Array<[Json, string]> = [
    [{ logprobs: true }, 'logprobs'],
    [{ top_logprobs: 2 }, 'top_logprobs'],
    [{ logit_bias: { 1: 2 } }, 'logit_bias'],
    [{ parallel_tool_calls: false }, 'parallel_tool_calls'],
    [{ modalities: ['text', 'audio'] }, 'modalities'],
    [{ audio: { voice: 'x' } }, 'audio'],
    [{ prediction: { type: 'content', content: 'x' } }, 'prediction'],
    [{ web_search_options: {} }, 'web_search_options'],
    [{ functions: [] }, 'functions'],
    [{ store: true }, 'store'],
    [{ service_tier: 'flex' }, 'service_tier'],
    [{ verbosity: 'low' }, 'verbosity'],
    [{ reasoning_effort: 'xhigh' }, 'reasoning_effort'],
    [{ response_format: { type: 'grammar' } }, 'response_format.type'],
    [{ tools: [{ type: 'custom', custom: { name: 'x' } }] }, 'tools[0].type'],
    [{ tools: [{ type: 'function', function: { name: 'f' } }], tool_choice: { type: 'allowed_tools' } }, 'tool_choice'],
    [{ something_new: 1 }, 'something_new'],
  ];
  for (const [chat, param] of refused) {
    it(`refuses ${param}, or drops it and logs its name once`, () => {
      assert.throws(() => translate(chat), (err: unknown) => err instanceof UnsupportedParameterError && err.param === param && err.message.includes(`does not support ${param}`));
      const lines: string[] = [];
      const drop = unsupportedPolicy({ provider: 'gem', type: 'gemini', drop: true, context: { warn: (_fields, line) => lines.push(line) } });
      const out = chatToGenerateContent({ messages: user, ...chat }, drop);
      chatToGenerateContent({ messages: user, ...chat }, drop);
      assert.equal(out.generationConfig, undefined, 'nothing of it is sent');
      assert.equal(lines.length, 1);
      assert.match(lines[0]!, new RegExp(`dropping unsupported parameter ${param.replace(/[[\]]/g, '\\$&').replace('0', '')}`));
    });
  }
});

describe('Gemini answers -> chat', () => {
  const reasons: Array<[string, boolean, string]> = [
    ['STOP', false, 'stop'],
    ['STOP', true, 'tool_calls'],
    ['MAX_TOKENS', false, 'length'],
    ['MAX_TOKENS', true, 'length'],
    ['SAFETY', false, 'content_filter'],
    ['RECITATION', false, 'content_filter'],
    ['BLOCKLIST', false, 'content_filter'],
    ['PROHIBITED_CONTENT', false, 'content_filter'],
    ['SPII', false, 'content_filter'],
    ['IMAGE_SAFETY', false, 'content_filter'],
    ['LANGUAGE', false, 'stop'],
    ['OTHER', false, 'stop'],
    ['MALFORMED_FUNCTION_CALL', false, 'stop'],
    ['FINISH_REASON_UNSPECIFIED', false, 'stop'],
  ];
  for (const [reason, calls, finish] of reasons) {
    it(`finish reason ${reason}${calls ? ' after function calls' : ''} -> ${finish}, and on through Anthropic and Responses`, () => {
      assert.equal(geminiFinishToChat(reason, calls), finish);
      const parts = calls ? [{ functionCall: { name: 'f', args: {} } }] : [{ text: 'x' }];
      const chat = generateContentToChat({ candidates: [{ content: { role: 'model', parts }, finishReason: reason }] }, 'm');
      assert.equal((chat.choices as Json[])[0]?.finish_reason, finish);
      const stop = { stop: 'end_turn', tool_calls: 'tool_use', length: 'max_tokens', content_filter: 'refusal' }[finish];
      assert.equal(chatToMessagesResponse(chat).stop_reason, stop);
      const status = finish === 'length' || finish === 'content_filter' ? 'incomplete' : 'completed';
      assert.equal(chatToResponsesResponse(chat, {}).status, status);
    });
  }

  it('usage: prompt with tool-use prompt tokens, completion with thinking tokens, cached tokens kept', () => {
    const usage = geminiUsageToChat({ promptTokenCount: 100, toolUsePromptTokenCount: 5, candidatesTokenCount: 20, thoughtsTokenCount: 30, cachedContentTokenCount: 60, totalTokenCount: 155 });
    assert.deepEqual(usage, {
      prompt_tokens: 105, completion_tokens: 50, total_tokens: 155,
      prompt_tokens_details: { cached_tokens: 60 }, completion_tokens_details: { reasoning_tokens: 30 },
    });
    assert.deepEqual(normalizeUsage(usage), { promptTokens: 105, completionTokens: 50, totalTokens: 155, cachedPromptTokens: 60 });
  });

  it('thought parts are left out; several candidates are several choices; a blocked prompt is content_filter', () => {
    const chat = generateContentToChat({
      responseId: 'abc',
      modelVersion: 'gemini-x-001',
      candidates: [
        { index: 0, content: { parts: [{ text: 'thinking...', thought: true }, { text: 'one' }] }, finishReason: 'STOP' },
        { index: 1, content: { parts: [{ text: 'two' }] }, finishReason: 'STOP' },
      ],
    }, 'm', 7);
    assert.deepEqual(chat, {
      id: 'chatcmpl-abc', object: 'chat.completion', created: 7, model: 'gemini-x-001',
      choices: [
        { index: 0, message: { role: 'assistant', content: 'one', refusal: null }, logprobs: null, finish_reason: 'stop' },
        { index: 1, message: { role: 'assistant', content: 'two', refusal: null }, logprobs: null, finish_reason: 'stop' },
      ],
    });
    const blocked = generateContentToChat({ promptFeedback: { blockReason: 'SAFETY' }, usageMetadata: { promptTokenCount: 3 } }, 'm');
    assert.equal((blocked.choices as Json[])[0]?.finish_reason, 'content_filter');
  });

  it('a thought signature rides in the tool call id and comes back to its call', () => {
    const signature = Buffer.from([0xfb, 0xff, 0x00, 0x10, 0x3e]).toString('base64');
    const id = toolCallId('call_abc', signature);
    assert.match(id, /^[A-Za-z0-9_-]+$/);
    assert.equal(signatureOfToolCallId(id), signature);
    assert.equal(signatureOfToolCallId('call_abc'), undefined);
    const out = chatToGenerateContent({ messages: [{ role: 'assistant', tool_calls: [{ id, type: 'function', function: { name: 'f', arguments: '' } }] }] }, refuse);
    assert.deepEqual((out.contents as Json[])[0]?.parts, [{ functionCall: { name: 'f', args: {} }, thoughtSignature: signature }]);
  });

  it('error bodies: the Google status as code, RetryInfo delays as retry-after headers', () => {
    const body = (delay?: string): Buffer => Buffer.from(JSON.stringify({
      error: { code: 429, message: 'quota', status: 'RESOURCE_EXHAUSTED', details: delay === undefined ? [] : [{ '@type': 'type.googleapis.com/google.rpc.RetryInfo', retryDelay: delay }] },
    }));
    const cases: Array<[string | undefined, Record<string, string>]> = [
      ['30s', { 'retry-after': '30', 'retry-after-ms': '30000' }],
      ['0.250s', { 'retry-after': '1', 'retry-after-ms': '250' }],
      ['1.5s', { 'retry-after': '2', 'retry-after-ms': '1500' }],
      [undefined, {}],
    ];
    for (const [delay, headers] of cases) {
      const out = googleErrorToOpenAI(body(delay), 429);
      assert.deepEqual(out.headers, headers, String(delay));
      assert.deepEqual(JSON.parse(out.body.toString()), { error: { message: 'quota', type: 'rate_limit_error', param: null, code: 'RESOURCE_EXHAUSTED' } });
    }
    const notJson = googleErrorToOpenAI(Buffer.from('<html>bad gateway</html>'), 502);
    assert.deepEqual(JSON.parse(notJson.body.toString()).error, { message: '<html>bad gateway</html>', type: 'api_error', param: null, code: null });
  });
});

describe('Gemini stream -> chat chunks', () => {
  it('text, a function call, the finish reason and the last usage', () => {
    const s = new GeminiToChatStream({ model: 'm', created: 1 });
    const deltas: unknown[] = [];
    const finishes: unknown[] = [];
    const events: Json[] = [
      { responseId: 'r1', candidates: [{ index: 0, content: { role: 'model', parts: [{ text: 'Hel' }] } }], usageMetadata: { promptTokenCount: 4 } },
      { candidates: [{ index: 0, content: { role: 'model', parts: [{ text: 'lo', thought: false }, { text: 'hidden', thought: true }] } }] },
      { candidates: [{ index: 0, content: { role: 'model', parts: [{ functionCall: { id: 'fc9', name: 'f', args: { a: 1 } } }] }, finishReason: 'STOP' }], usageMetadata: { promptTokenCount: 4, candidatesTokenCount: 6, totalTokenCount: 10 } },
    ];
    assert.equal(s.complete, false);
    for (const ev of events) {
      for (const chunk of s.push(ev)) {
        assert.equal(chunk.id, 'chatcmpl-r1');
        const choice = (chunk.choices as Json[])[0]!;
        deltas.push(choice.delta);
        if (choice.finish_reason !== null) finishes.push(choice.finish_reason);
      }
    }
    assert.deepEqual(deltas, [
      { role: 'assistant', content: '' },
      { content: 'Hel' },
      { content: 'lo' },
      { tool_calls: [{ index: 0, id: 'fc9', type: 'function', function: { name: 'f', arguments: '{"a":1}' } }] },
      {},
    ]);
    assert.deepEqual(finishes, ['tool_calls']);
    assert.equal(s.complete, true);
    assert.deepEqual(s.usage(), { promptTokens: 4, completionTokens: 6, totalTokens: 10, cachedPromptTokens: 0 });
    const [last] = s.end();
    assert.deepEqual([last?.choices, (last?.usage as Json).total_tokens], [[], 10]);
  });

  it('an error event in the stream goes on as an error chunk, in each dialect', () => {
    const s = new GeminiToChatStream({ model: 'm' });
    const chunks = s.push({ error: { code: 503, message: 'The model is overloaded.', status: 'UNAVAILABLE' } });
    assert.deepEqual(chunks, [{ error: { message: 'The model is overloaded.', type: 'api_error', param: null, code: 'UNAVAILABLE' } }]);
    assert.equal(new ChatSseWriter({ includeUsage: false }).push(chunks[0]!), `data: ${JSON.stringify(chunks[0])}\n\n`);
    assert.deepEqual(sseEvents(new ChatToMessagesStream({ model: 'm' }).push(chunks[0]!)).map((e) => e.data), [{ type: 'error', error: { type: 'api_error', message: 'The model is overloaded.' } }]);
    assert.equal(s.complete, false);
  });

  it('a stream without a finish reason is not complete and ends with nothing', () => {
    const s = new GeminiToChatStream({ model: 'm' });
    s.push({ candidates: [{ content: { parts: [{ text: 'partial' }] } }], usageMetadata: { promptTokenCount: 2 } });
    assert.equal(s.complete, false);
    assert.deepEqual(s.end(), []);
    assert.equal(s.usage()?.promptTokens, 2, 'what was seen is still counted');
  });
});

describe('embeddings', () => {
  const drop = unsupportedPolicy({ provider: 'gem', type: 'gemini', drop: false });

  it('one string or a list; Gemini and Vertex bodies; answers in OpenAI shape, base64 when asked', () => {
    const one = readEmbeddingsRequest({ model: 'e', input: 'abcdefgh', dimensions: 2 }, drop);
    assert.deepEqual(geminiEmbedRequest('e', one), { method: 'embedContent', body: { content: { parts: [{ text: 'abcdefgh' }] }, outputDimensionality: 2 } });
    const many = readEmbeddingsRequest({ model: 'e', input: ['a', 'b'], encoding_format: 'base64' }, drop);
    assert.deepEqual(geminiEmbedRequest('e', many), { method: 'batchEmbedContents', body: { requests: [{ model: 'models/e', content: { parts: [{ text: 'a' }] } }, { model: 'models/e', content: { parts: [{ text: 'b' }] } }] } });
    assert.deepEqual(vertexPredictBody(many), { instances: [{ content: 'a' }, { content: 'b' }] });
    const answer = embeddingsResponse('e', many, readVertexPredict({ predictions: [{ embeddings: { values: [0.5, -1], statistics: { token_count: 3 } } }, { embeddings: { values: [2, 0.25], statistics: { token_count: 4 } } }] }));
    const data = answer.data as Json[];
    assert.deepEqual(Array.from(new Float32Array(Uint8Array.from(Buffer.from(String(data[1]?.embedding), 'base64')).buffer)), [2, 0.25]);
    assert.deepEqual(answer.usage, { prompt_tokens: 7, total_tokens: 7 });
    assert.deepEqual(embeddingsResponse('e', one, { vectors: [[1]], promptTokens: undefined }).usage, { prompt_tokens: 2, total_tokens: 2 }, 'estimated');
  });

  it('token arrays and unknown options are refused', () => {
    assert.throws(() => readEmbeddingsRequest({ input: [[1, 2]] }, drop), (e: unknown) => e instanceof UnsupportedParameterError && e.param === 'input[0]');
    assert.throws(() => readEmbeddingsRequest({ input: 'x', task: 'y' }, drop), (e: unknown) => e instanceof UnsupportedParameterError && e.param === 'task');
  });
});
