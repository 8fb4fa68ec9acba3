import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseJsonRequest } from '../../src/http/requests.ts';
import { GatewayError } from '../../src/errors/gateway-error.ts';

type JsonEndpoint = Parameters<typeof parseJsonRequest>[0];

/** The 400's message for `body`, or 'ok' when it is accepted. */
function outcome(endpoint: JsonEndpoint, body: unknown): string {
  try {
    parseJsonRequest(endpoint, body);
    return 'ok';
  } catch (err) {
    assert.ok(err instanceof GatewayError && err.status === 400, String(err));
    return err.message;
  }
}

const messages = [{ role: 'user', content: 'x' }];

describe('parseJsonRequest', () => {
  it('accepts the valid body of every endpoint and reads model and stream from it', () => {
    const chat = { model: ' m ', messages, stream: true, extra: { kept: 1 } };
    const bytes = Buffer.from(JSON.stringify(chat));
    const r = parseJsonRequest('chat', chat, bytes);
    assert.deepEqual([r.model, r.stream], ['m', true]);
    assert.equal(r.json, chat, 'the client\'s own object is forwarded: unknown fields and the untrimmed model kept');
    assert.equal(r.jsonBytes, bytes);
    assert.equal(outcome('chat', { model: 'm', messages: [1, 'two', null] }), 'ok', 'message items are the provider\'s to judge');
    assert.equal(parseJsonRequest('responses', { model: 'm', input: 'hi' }).stream, false);
    assert.equal(outcome('embeddings', { model: 'm', input: ['a', 'b'] }), 'ok');
    assert.equal(outcome('embeddings', { model: 'm', input: 'a' }), 'ok');
    assert.equal(outcome('speech', { model: 'm', input: 'say it' }), 'ok');
    assert.equal(outcome('messages', { model: 'm', messages, max_tokens: 1, stream: false }), 'ok');
  });

  // Every way a field can be wrong, each with the message the client gets.
  const rejected: Array<[JsonEndpoint, unknown, string]> = [
    ['chat', [1, 2], 'request body must be a JSON object'],
    ['chat', null, 'request body must be a JSON object'],
    ['chat', { messages }, 'model: is required'],
    ['chat', { model: null, messages }, 'model: must be a string'],
    ['chat', { model: 'm' }, 'messages: is required'],
    ['chat', { model: 'm', messages: {} }, 'messages: must be an array'],
    ['chat', { model: 'm', messages, stream: 'yes' }, 'stream: must be a boolean'],
    ['chat', { model: 'm', messages, stream: null }, 'stream: must be a boolean'],
    ['chat', { model: 'm', messages: [] }, 'messages: must not be empty'],
    ['chat', { model: ' ', messages }, 'model: must not be empty'],
    ['responses', { model: 'm', stream: 1 }, 'stream: must be a boolean'],
    ['embeddings', { model: 'm' }, 'input: must be a string or an array'],
    ['embeddings', { model: 'm', input: 5 }, 'input: must be a string or an array'],
    ['speech', { model: 'm', input: ['a'] }, 'input: must be a string'],
    ['messages', { model: 'm', messages }, 'max_tokens: is required'],
    ['messages', { model: 'm', messages, max_tokens: 0 }, 'max_tokens: must be at least 1'],
    ['messages', { model: 'm', messages, max_tokens: -3 }, 'max_tokens: must be at least 1'],
    ['messages', { model: 'm', messages, max_tokens: 1.5 }, 'max_tokens: must be an integer'],
    ['messages', { model: 'm', messages, max_tokens: 2 ** 60 }, 'max_tokens: must be an integer'],
    ['messages', { model: 'm', messages, max_tokens: '5' }, 'max_tokens: must be an integer'],
    ['messages', { model: 'm', messages, max_tokens: 5, stream: 'no' }, 'stream: must be a boolean'],
  ];
  for (const [endpoint, body, message] of rejected) {
    it(`${endpoint} ${JSON.stringify(body)} → 400 "${message}"`, () => {
      assert.equal(outcome(endpoint, body), message);
    });
  }
});
