/**
 * `type: vertex`: Gemini models on Vertex AI, at
 * `{base_url}/v1/projects/{project}/locations/{location}/publishers/google/models/{model}:…`.
 * Credentials through Google's auth library: `credentials_file` (a service-account key, whose
 * `token_uri` is used as is), else application-default credentials; an `api_key` instead is sent
 * as `x-goog-api-key`. Access tokens are cached by the library and refreshed before they expire.
 * Vertex has no model list for publisher models: the configured `models` are served, or, without
 * them, any `<provider>/<model>` name is passed on for Vertex to judge.
 */
import { readFileSync } from 'node:fs';
import type { JWT } from 'google-auth-library';
import { z } from 'zod';
import { booleanSetting, coerceString, optionalUrlSetting, str as strSetting } from '../shared/config-fields.ts';
import { isRecord } from '../shared/json.ts';
import { GoogleGenerativeProvider, modelMethodPath, type GoogleApi } from './google-generative.ts';
import { readVertexPredict, vertexPredictBody } from './translate/gemini-embeddings.ts';
import { defineProviderType } from './types.ts';
import { DEFAULT_TIMEOUT_MS } from './upstream.ts';

const SCOPE = 'https://www.googleapis.com/auth/cloud-platform';
/** Where the library sends every service-account token request, whatever the key file says. */
const GOOGLE_TOKEN_URL = 'https://oauth2.googleapis.com/token';

interface ServiceAccountKey {
  client_email: string;
  private_key: string;
  private_key_id?: string;
  token_uri?: string;
}

/** Reads and checks a service-account key file; the error says what is wrong with it. */
export function readServiceAccountKey(path: string): ServiceAccountKey {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new Error(`cannot read ${JSON.stringify(path)}: ${err instanceof Error ? err.message : String(err)}`);
  }
  let key: unknown;
  try {
    key = JSON.parse(text);
  } catch {
    throw new Error(`${JSON.stringify(path)} is not JSON (expected a service-account key file)`);
  }
  if (!isRecord(key) || key.type !== 'service_account') {
    const type = isRecord(key) ? JSON.stringify(key.type) : 'none';
    throw new Error(`${JSON.stringify(path)} is not a service-account key file (its type is ${type}; other credentials are found as application-default credentials when credentials_file is left out)`);
  }
  for (const field of ['client_email', 'private_key'] as const) {
    if (typeof key[field] !== 'string' || key[field] === '') throw new Error(`${JSON.stringify(path)} has no ${field}`);
  }
  if (key.token_uri !== undefined && (typeof key.token_uri !== 'string' || !/^https?:\/\//.test(key.token_uri))) {
    throw new Error(`${JSON.stringify(path)}: token_uri must be an http(s) URL`);
  }
  return key as unknown as ServiceAccountKey;
}

/** A path to a readable service-account key file, checked when the config is loaded. */
const credentialsFileSetting = () =>
  z.preprocess(
    coerceString,
    strSetting()
      .superRefine((path, ctx) => {
        try {
          readServiceAccountKey(path);
        } catch (err) {
          ctx.addIssue({ code: 'custom', message: err instanceof Error ? err.message : String(err) });
        }
      })
      .optional(),
  );

const requiredName = (what: string, pattern: RegExp, example: string) =>
  z.preprocess(coerceString, strSetting().regex(pattern, { error: `must be a Google Cloud ${what} such as ${example}` }));

export const vertexProviderType = defineProviderType({
  type: 'vertex',
  configFields: {
    project: requiredName('project id', /^[a-z0-9][a-z0-9.:-]*$/, 'my-project'),
    location: requiredName('location', /^[a-z0-9-]+$/, 'us-central1 or global'),
    credentials_file: credentialsFileSetting(),
    base_url: optionalUrlSetting(),
    drop_unsupported: booleanSetting(false),
  },
  create(name, settings, context) {
    const { project, location } = settings;
    const prefix = `/v1/projects/${encodeURIComponent(project)}/locations/${encodeURIComponent(location)}`;
    const modelPath = (model: string, method: string): string => modelMethodPath(prefix, 'publishers/google/models', model, method);
    const api: GoogleApi = {
      generatePath: (model, stream) => modelPath(model, stream ? 'streamGenerateContent?alt=sse' : 'generateContent'),
      embed: (model, input) => ({ path: modelPath(model, 'predict'), body: vertexPredictBody(input), read: readVertexPredict }),
      credentials: vertexCredentials(settings.api_key || undefined, settings.credentials_file, settings.timeout_ms ?? DEFAULT_TIMEOUT_MS),
    };
    const baseUrl = settings.base_url ?? defaultBaseUrl(location);
    return new GoogleGenerativeProvider({ name, type: 'vertex', baseUrl, api, settings, context });
  },
  pricesProvider: 'google',
});

/** `https://us-central1-aiplatform.googleapis.com`; the global location has no regional host. */
function defaultBaseUrl(location: string): string {
  return location === 'global' ? 'https://aiplatform.googleapis.com' : `https://${location}-aiplatform.googleapis.com`;
}

/**
 * The headers of one call: the API key, or a bearer token the auth library caches and refreshes.
 * A token request gets as long as an upstream answer (`timeout_ms`). The library is loaded on the
 * first token asked for, so a gateway without Vertex OAuth never pays for loading it.
 */
function vertexCredentials(apiKey: string | undefined, credentialsFile: string | undefined, timeoutMs: number): () => Promise<Record<string, string>> {
  if (apiKey !== undefined) {
    const headers = { 'x-goog-api-key': apiKey };
    return async () => headers;
  }
  const key = credentialsFile === undefined ? undefined : readServiceAccountKey(credentialsFile);
  let source: Promise<() => Promise<string | null | undefined>> | undefined;
  return async () => {
    source ??= tokenSource(key, timeoutMs).catch((err: unknown) => {
      source = undefined;
      throw err;
    });
    const token = await (await source)();
    if (!token) throw new Error('the auth library returned no access token');
    return { authorization: `Bearer ${token}` };
  };
}

/** The service account's client for a key file, else application-default credentials. */
async function tokenSource(key: ServiceAccountKey | undefined, timeoutMs: number): Promise<() => Promise<string | null | undefined>> {
  const library = await import('google-auth-library');
  if (key !== undefined) {
    const client = serviceAccountClient(library, key, timeoutMs);
    return async () => (await client.getAccessToken()).token;
  }
  const adc = new library.GoogleAuth({ scopes: [SCOPE], clientOptions: { transporterOptions: { timeout: timeoutMs } } });
  return () => adc.getAccessToken();
}

/**
 * The library's service-account client (it signs the JWT grant, caches the token and refreshes it
 * before it expires). It posts the grant to Google's token URL whatever the key file's `token_uri`
 * says, with that URL as the audience; a key file naming another token endpoint (a private or
 * test one) gets that endpoint through the client's own transporter, and it as the audience.
 */
function serviceAccountClient(library: typeof import('google-auth-library'), key: ServiceAccountKey, timeoutMs: number): JWT {
  const tokenUri = key.token_uri ?? GOOGLE_TOKEN_URL;
  const transporter = new library.gaxios.Gaxios({ timeout: timeoutMs });
  if (tokenUri !== GOOGLE_TOKEN_URL) {
    const target = new URL(tokenUri);
    transporter.interceptors.request.add({
      resolved: async (options) => {
        if (options.url.href === GOOGLE_TOKEN_URL) options.url = target;
        return options;
      },
    });
  }
  return new library.JWT({
    email: key.client_email,
    key: key.private_key,
    keyId: key.private_key_id,
    scopes: [SCOPE],
    additionalClaims: { aud: tokenUri },
    transporter,
  });
}
