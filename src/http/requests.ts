import type { IncomingHttpHeaders } from 'node:http';
import type { Endpoint } from '../providers/types.ts';
import { badRequest } from '../errors/gateway-error.ts';
import { modelRequestBodies, type JsonEndpoint } from './schemas/model-requests.ts';
import { parseBody } from './validation.ts';

/** A model request after validation: what routing and the provider adapters need. */
export interface ModelRequest {
  endpoint: Endpoint;
  /** The model name as the client sent it, trimmed. */
  model: string;
  stream: boolean;
  json?: Record<string, unknown>;
  /** The bytes `json` was parsed from, forwarded as they are when nothing in them needs to change. */
  jsonBytes?: Buffer;
  form?: FormData;
  /** Client headers a provider may need to pass on (e.g. `anthropic-version` on /v1/messages). */
  headers?: IncomingHttpHeaders;
}

/** Validates a JSON model request once with its endpoint's schema; the client's object is what gets forwarded. */
export function parseJsonRequest(endpoint: JsonEndpoint, body: unknown, jsonBytes?: Buffer): ModelRequest {
  const data = parseBody(modelRequestBodies[endpoint], body);
  return { endpoint, model: data.model, stream: data.stream === true, json: body as Record<string, unknown>, jsonBytes };
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
