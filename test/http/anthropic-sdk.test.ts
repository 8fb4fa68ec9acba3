import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { startFakeUpstream, type FakeUpstream } from '../support/fake-upstream.ts';
import { startTestGateway, type TestGateway } from '../support/gateway.ts';
import { anthropicProvider, openaiProvider } from '../support/e2e.ts';

describe('Anthropic Messages API through the gateway', () => {
  let ant: FakeUpstream;
  let oai: FakeUpstream;
  let gw: TestGateway;
  let anthropic: Anthropic;
  let openai: OpenAI;

  before(async () => {
    ant = await startFakeUpstream({ apiKey: 'k-ant', name: 'ant' });
    oai = await startFakeUpstream({ apiKey: 'k-oai', name: 'oai' });
    gw = await startTestGateway({
      yaml: 'providers:\n' + anthropicProvider('ant', ant.url, ['claude-x']) + openaiProvider('oai', oai.url, ['gpt-x']),
    });
    anthropic = new Anthropic({ baseURL: gw.url, apiKey: 'unused', maxRetries: 0 });
    openai = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: 'unused', maxRetries: 0 });
  });
  after(async () => {
    await gw?.close();
    await ant?.close();
    await oai?.close();
  });

  it('@anthropic-ai/sdk: non-streamed message to an anthropic provider', async () => {
    ant.reset();
    const msg = await anthropic.messages.create({ model: 'ant/claude-x', max_tokens: 50, messages: [{ role: 'user', content: 'hello claude' }] });
    assert.equal(msg.type, 'message');
    assert.equal(msg.role, 'assistant');
    const block = msg.content[0];
    assert.equal(block?.type, 'text');
    assert.equal(block?.type === 'text' ? block.text : '', 'hello claude');
    assert.ok(msg.usage.input_tokens > 0 && msg.usage.output_tokens > 0);
    const call = ant.calls[0];
    assert.equal(call?.path, '/v1/messages');
    assert.equal(call?.model, 'claude-x');
    assert.equal(call?.headers['x-api-key'], 'k-ant', 'the provider key is sent, not the client key');
    assert.ok(call?.headers['anthropic-version']);
  });

  it('@anthropic-ai/sdk: streamed message to an anthropic provider', async () => {
    ant.reset();
    const stream = anthropic.messages.stream({ model: 'claude-x', max_tokens: 50, messages: [{ role: 'user', content: 'stream from claude' }] });
    let text = '';
    const types: string[] = [];
    for await (const ev of stream) {
      types.push(ev.type);
      if (ev.type === 'content_block_delta' && ev.delta.type === 'text_delta') text += ev.delta.text;
    }
    const final = await stream.finalMessage();
    assert.equal(text, 'stream from claude');
    assert.equal(types[0], 'message_start');
    assert.equal(types.at(-1), 'message_stop');
    assert.equal(final.stop_reason, 'end_turn');
    assert.ok(final.usage.output_tokens > 0);
    assert.equal(ant.calls[0]?.stream, true);
    assert.equal(ant.calls[0]?.model, 'claude-x');
  });

  it('@anthropic-ai/sdk against an openai-type provider: translated both ways', async () => {
    oai.reset();
    const msg = await anthropic.messages.create({
      model: 'oai/gpt-x',
      max_tokens: 50,
      system: 'be brief',
      messages: [{ role: 'user', content: 'translated hello' }],
    });
    assert.equal(msg.type, 'message');
    const block = msg.content[0];
    assert.equal(block?.type === 'text' ? block.text : undefined, 'translated hello');
    assert.ok(msg.usage.input_tokens > 0);
    const call = oai.calls[0];
    assert.equal(call?.path, '/v1/chat/completions', 'an openai provider is called on chat completions');
    assert.equal(call?.model, 'gpt-x');
    const body = call?.body as { messages: Array<{ role: string; content: unknown }> };
    assert.equal(body.messages[0]?.role, 'system');
    assert.equal(call?.headers.authorization, 'Bearer k-oai');
  });

  it('@anthropic-ai/sdk streamed against an openai-type provider', async () => {
    oai.reset();
    const stream = anthropic.messages.stream({ model: 'oai/gpt-x', max_tokens: 50, messages: [{ role: 'user', content: 'a b c d' }] });
    let text = '';
    for await (const ev of stream) {
      if (ev.type === 'content_block_delta' && ev.delta.type === 'text_delta') text += ev.delta.text;
    }
    const final = await stream.finalMessage();
    assert.equal(text, 'a b c d');
    assert.ok(final.stop_reason);
    assert.equal(oai.calls[0]?.path, '/v1/chat/completions');
    assert.equal(oai.calls[0]?.stream, true);
  });

  it('openai SDK chat completions against the anthropic provider (translated)', async () => {
    ant.reset();
    const res = await openai.chat.completions.create({
      model: 'ant/claude-x',
      messages: [{ role: 'system', content: 'sys' }, { role: 'user', content: 'from openai sdk' }],
    });
    assert.equal(res.object, 'chat.completion');
    assert.equal(res.choices[0]?.message.content, 'from openai sdk');
    assert.equal(res.choices[0]?.finish_reason, 'stop');
    assert.ok(res.usage && res.usage.total_tokens > 0);
    const call = ant.calls[0];
    assert.equal(call?.path, '/v1/messages');
    assert.equal(call?.model, 'claude-x');
    const body = call?.body as { system?: unknown; messages: Array<{ role: string }>; max_tokens?: number };
    assert.ok(body.system, 'the system message became the Anthropic system field');
    assert.ok(body.messages.every((m) => m.role !== 'system'));
    assert.equal(typeof body.max_tokens, 'number', 'max_tokens is required by Anthropic and filled in');
  });

  it('openai SDK streamed chat completions against the anthropic provider', async () => {
    ant.reset();
    const stream = await openai.chat.completions.create({
      model: 'ant/claude-x',
      messages: [{ role: 'user', content: 'streamed via translation' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = '';
    let finish: string | null | undefined;
    let usage: OpenAI.CompletionUsage | null | undefined;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? '';
      if (chunk.choices[0]?.finish_reason) finish = chunk.choices[0].finish_reason;
      if (chunk.usage) usage = chunk.usage;
    }
    assert.equal(text, 'streamed via translation');
    assert.equal(finish, 'stop');
    assert.ok(usage && usage.total_tokens > 0, 'usage chunk present');
    assert.equal(ant.calls[0]?.stream, true);
  });

  it('answers /v1/messages errors in the Anthropic shape, which the SDK understands', async () => {
    ant.reset();
    ant.failNext(1, { status: 500 });
    await assert.rejects(
      anthropic.messages.create({ model: 'ant/claude-x', max_tokens: 10, messages: [{ role: 'user', content: 'x' }] }),
      (err: unknown) => {
        assert.ok(err instanceof Anthropic.APIError);
        assert.equal(err.status, 500);
        assert.deepEqual(Object.keys(err.error as object).sort(), ['error', 'type']);
        assert.equal((err.error as { error: { type: string } }).error.type, 'provider_error');
        return true;
      },
    );
    await assert.rejects(
      anthropic.messages.create({ model: 'nope/none', max_tokens: 10, messages: [{ role: 'user', content: 'x' }] }),
      (err: unknown) => {
        assert.ok(err instanceof Anthropic.NotFoundError);
        assert.equal((err.error as { error: { type: string } }).error.type, 'not_found_error');
        return true;
      },
    );
  });
});
