import type { IncomingHttpHeaders } from 'node:http';
import { z } from 'zod';
import type { Json } from '../providers/translate/json.ts';
import { isRecord } from '../shared/json.ts';
import type { Endpoint } from '../providers/types.ts';
import { badRequest } from './errors.ts';
import { parseBody } from './validation.ts';

/** A model request after validation: what routing and the provider adapters need. */
export interface ModelRequest {
  endpoint: Endpoint;
  /** The model name as the client sent it. */
  model: string;
  stream: boolean;
  json?: Record<string, unknown>;
  /** The bytes `json` was parsed from, forwarded as they are when nothing in them needs to change. */
  jsonBytes?: Buffer;
  form?: FormData;
  /** Client headers a provider may need to pass on (e.g. `anthropic-version` on /v1/messages). */
  headers?: IncomingHttpHeaders;
}

type JsonEndpoint = Exclude<Endpoint, 'transcriptions'>;

// A non-empty model and messages list are checked in parseJsonRequest, not with zod's `.min()`:
// zod runs every schema's checks through one shared function, which validating a configuration
// with rate-limit rules at start-up leaves megamorphic for the life of the process (with 10 rules
// configured, moving the checks here took the rules' cost from 16,100 to 13,100 instructions a
// request; bench/instructions.ts).
const modelField = z.string({ error: 'must be a string' });
const messagesField = z.array(z.unknown(), { error: 'must be an array' });
const streamField = z.boolean({ error: 'must be a boolean' }).optional();

// Loose objects: the gateway checks what it needs and forwards the rest untouched.
const schemas = {
  chat: z.looseObject({ model: modelField, messages: messagesField, stream: streamField }),
  responses: z.looseObject({ model: modelField, stream: streamField }),
  embeddings: z.looseObject({ model: modelField, input: z.union([z.string(), z.array(z.unknown())], { error: 'must be a string or an array' }) }),
  speech: z.looseObject({ model: modelField, input: z.string({ error: 'must be a string' }) }),
  messages: z.looseObject({
    model: modelField,
    messages: messagesField,
    max_tokens: z.int({ error: 'must be an integer' }).positive({ error: 'must be at least 1' }),
    stream: streamField,
  }),
} satisfies Record<JsonEndpoint, z.ZodType>;

const isOptionalBoolean = (v: unknown): boolean => v === undefined || typeof v === 'boolean';

/**
 * Each schema's valid case, checked by hand: zod's parse of a chat body cost ~6,400 instructions
 * a request (bench/instructions.ts). A body these accept is one its schema accepts; any other
 * body goes through the schema, which then names what is wrong.
 */
const valid: Record<JsonEndpoint, (b: Json) => boolean> = {
  chat: (b) => typeof b.model === 'string' && Array.isArray(b.messages) && isOptionalBoolean(b.stream),
  responses: (b) => typeof b.model === 'string' && isOptionalBoolean(b.stream),
  embeddings: (b) => typeof b.model === 'string' && (typeof b.input === 'string' || Array.isArray(b.input)),
  speech: (b) => typeof b.model === 'string' && typeof b.input === 'string',
  messages: (b) => typeof b.model === 'string' && Array.isArray(b.messages) && Number.isSafeInteger(b.max_tokens)
    && (b.max_tokens as number) > 0 && isOptionalBoolean(b.stream),
};

export function parseJsonRequest(endpoint: JsonEndpoint, body: unknown, jsonBytes?: Buffer): ModelRequest {
  const data = isRecord(body) && valid[endpoint](body) ? body as { model: string; stream?: boolean } : parseBody(schemas[endpoint], body);
  const model = data.model.trim();
  if (model === '') throw badRequest('model: must not be empty', 'model');
  if ('messages' in data && (data.messages as unknown[]).length === 0) throw badRequest('messages: must not be empty', 'messages');
  return { endpoint, model, stream: (data as { stream?: boolean }).stream === true, json: body as Record<string, unknown>, jsonBytes };
}

export async function parseTranscriptionRequest(raw: Buffer, contentType: string | undefined): Promise<ModelRequest> {
  if (!contentType?.toLowerCase().startsWith('multipart/form-data')) {
    throw badRequest('audio transcriptions take a multipart/form-data body', null, 'invalid_content_type');
  }
  let form: FormData;
  try {
    form = await new Request('http://gateway.invalid/', { method: 'POST', body: raw, headers: { 'content-type': contentType } }).formData();
  } catch {
    throw badRequest('malformed multipart/form-data body');
  }
  const model = form.get('model');
  if (typeof model !== 'string' || model.trim() === '') throw badRequest('model: required form field (a string)', 'model');
  if (!(form.get('file') instanceof Blob)) throw badRequest('file: required form field (an audio file)', 'file');
  return { endpoint: 'transcriptions', model: model.trim(), stream: form.get('stream') === 'true', form };
}

/** Encodes a form again with the provider's model id in place of the client's. */
export async function encodeFormForModel(form: FormData, model: string): Promise<{ body: Buffer; contentType: string }> {
  const copy = new FormData();
  for (const [name, value] of form) copy.append(name, name === 'model' ? model : value);
  const encoded = new Response(copy);
  return { body: Buffer.from(await encoded.arrayBuffer()), contentType: encoded.headers.get('content-type') ?? 'multipart/form-data' };
}
