/**
 * `type: gemini`: the Gemini API (Google AI Studio keys). `api_key` is sent as `x-goog-api-key`;
 * `base_url` defaults to Google's and takes the host (a trailing `/v1beta` is dropped, so a
 * copied endpoint works). Models are discovered from `GET /v1beta/models` when none are listed.
 */
import { booleanSetting, defaultUrlSetting } from '../shared/config-fields.ts';
import { Cancellation } from './cancellation.ts';
import { GoogleGenerativeProvider, modelMethodPath, type GoogleApi } from './google-generative.ts';
import { geminiEmbedRequest, readGeminiEmbeddings } from './translate/gemini-embeddings.ts';
import { arr, obj, parseJsonObject, str } from './translate/json.ts';
import { defineProviderType, UpstreamUnavailableError } from './types.ts';
import type { UpstreamClient } from './upstream.ts';

const GEMINI_DEFAULT_BASE_URL = 'https://generativelanguage.googleapis.com';
const API_VERSION = '/v1beta';
/** Methods that make a model worth listing: it chats or it embeds. */
const SERVED_METHODS = new Set(['generateContent', 'embedContent']);

function normalizeGeminiBaseUrl(url: string): string {
  return url.replace(/\/+$/, '').replace(/\/v1(beta)?$/, '');
}

export const geminiProviderType = defineProviderType({
  type: 'gemini',
  configFields: {
    base_url: defaultUrlSetting(GEMINI_DEFAULT_BASE_URL, normalizeGeminiBaseUrl),
    drop_unsupported: booleanSetting(false),
  },
  create(name, settings, context) {
    const apiKey = settings.api_key || undefined;
    const api: GoogleApi = {
      generatePath: (model, stream) => modelPath(model, stream ? 'streamGenerateContent?alt=sse' : 'generateContent'),
      embed(model, input) {
        const { method, body } = geminiEmbedRequest(model, input);
        return { path: modelPath(model, method), body, read: readGeminiEmbeddings };
      },
      credentials: async (): Promise<Record<string, string>> => (apiKey === undefined ? {} : { 'x-goog-api-key': apiKey }),
      discover: (client, headers) => discover(name, client, headers),
    };
    const baseUrl = normalizeGeminiBaseUrl(settings.base_url ?? GEMINI_DEFAULT_BASE_URL);
    return new GoogleGenerativeProvider({ name, type: 'gemini', baseUrl, api, settings, context });
  },
  pricesProvider: 'google',
});

/** `/v1beta/models/{model}:{method}`. */
function modelPath(model: string, method: string): string {
  return modelMethodPath(API_VERSION, 'models', model, method);
}

/** `GET /v1beta/models`, page by page: the models that generate content or embeddings, without their `models/` prefix. */
async function discover(name: string, client: UpstreamClient, headers: Record<string, string>): Promise<string[]> {
  const cancel = Cancellation.never();
  const ids: string[] = [];
  let pageToken: string | undefined;
  // A handful of pages covers the whole catalogue; the bound guards against a token that never ends.
  for (let page = 0; page < 20; page++) {
    const path = `${API_VERSION}/models?pageSize=1000${pageToken ? `&pageToken=${encodeURIComponent(pageToken)}` : ''}`;
    const res = await client.request({ method: 'GET', path, headers, cancel });
    const buf = await client.readAll(res.body, cancel);
    if (res.status >= 400) {
      throw new UpstreamUnavailableError(name, `provider ${name}: model discovery (GET ${API_VERSION}/models) failed with status ${res.status}`, 502);
    }
    const body = parseJsonObject(buf.toString('utf8'));
    for (const raw of arr(body?.models)) {
      const m = obj(raw);
      const id = str(m?.name)?.replace(/^models\//, '');
      if (id !== undefined && arr(m?.supportedGenerationMethods).some((method) => typeof method === 'string' && SERVED_METHODS.has(method))) ids.push(id);
    }
    pageToken = str(body?.nextPageToken);
    if (!pageToken) break;
  }
  return ids;
}
