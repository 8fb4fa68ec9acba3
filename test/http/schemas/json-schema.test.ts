import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { z } from 'zod';
import * as adminKeys from '../../../src/http/schemas/admin-keys.ts';
import * as adminRateLimits from '../../../src/http/schemas/admin-rate-limits.ts';
import * as batches from '../../../src/http/schemas/batches.ts';
import * as modelRequests from '../../../src/http/schemas/model-requests.ts';
import * as usage from '../../../src/http/schemas/usage.ts';

type ObjectSchema = { type: string; properties: Record<string, unknown>; required?: string[]; additionalProperties: unknown };

/** The request side of a schema, as the OpenAPI document shows it (a form's file by its own description). */
const requestSide = (schema: z.ZodType) => z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as ObjectSchema;

describe('request schemas as JSON Schema', () => {
  it('every schema in src/http/schemas converts (transforms show their input shape)', () => {
    const modules = { adminKeys, adminRateLimits, batches, modelRequests, usage };
    let count = 0;
    for (const [name, module] of Object.entries(modules)) {
      for (const [exported, value] of Object.entries(module)) {
        if (!(value instanceof z.ZodType)) continue;
        assert.equal(requestSide(value).type, 'object', `${name}.${exported}`);
        count++;
      }
    }
    assert.ok(count >= 12, `found ${count} schemas`);
    assert.deepEqual(requestSide(batches.uploadFileForm).properties.file, { type: 'string', contentMediaType: 'application/octet-stream', description: 'The file\'s bytes (JSONL, one request a line).' });
  });

  it('model bodies are open (unknown fields allowed), admin bodies closed', () => {
    const chat = requestSide(modelRequests.chatCompletionBody);
    assert.deepEqual(chat.required, ['model', 'messages']);
    assert.deepEqual(chat.additionalProperties, {});
    const put = requestSide(adminRateLimits.putRateLimitBody);
    assert.deepEqual(Object.keys(put.properties), ['user_path', 'scope', 'subject', 'limit_key', 'max_requests', 'max_tokens', 'per_child']);
    assert.deepEqual(put.required, ['limit_key']);
    assert.equal(put.additionalProperties, false);
    assert.deepEqual(put.properties.scope, { type: 'string', enum: ['user_path', 'provider', 'model'] });
  });
});
