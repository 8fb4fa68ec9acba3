/**
 * OpenAI embeddings for a provider whose own embedding call is not OpenAI's (`bedrock`'s Titan
 * through InvokeModel, `gemini`, `vertex`): the request read into texts and options, refusing
 * what cannot be carried, and OpenAI's answer built from the vectors the provider returned.
 */
import { UnsupportedParameterError } from '../types.ts';
import { estimateTokens } from '../usage.ts';
import { arr, num } from './json.ts';
import type { Json } from './json.ts';
import type { UnsupportedPolicy } from './unsupported.ts';

export interface EmbeddingsInput {
  texts: string[];
  /** `input` was one string (not a list). */
  single: boolean;
  dimensions: number | undefined;
  /** `encoding_format: base64` (the official SDKs ask for it by default). */
  base64: boolean;
}

export interface Embeddings {
  /** One vector per text, in the order of the texts. */
  vectors: number[][];
  /** Input tokens, when the answer counts them. */
  promptTokens: number | undefined;
}

/** Read, or (`user`) only labels the request; `dimensions` depends on the model. */
const CARRIED = new Set(['model', 'input', 'encoding_format', 'user']);

/**
 * The texts and options of an embeddings request. Token arrays and an empty input are a 400
 * (`invalid_value`) whatever `drop_unsupported` says; other parameters go to the policy, and so
 * does `dimensions` for a model of fixed size (`dimensions: false`).
 */
export function readEmbeddingsRequest(json: Json, policy: UnsupportedPolicy, opts: { dimensions?: boolean } = {}): EmbeddingsInput {
  const input = json.input;
  const texts = typeof input === 'string' ? [input] : arr(input);
  texts.forEach((t, i) => {
    if (typeof t !== 'string') {
      const param = typeof input === 'string' ? 'input' : `input[${i}]`;
      throw new UnsupportedParameterError(`${param}: only text is embedded (a string or a list of strings); token arrays are not accepted`, param, 'invalid_value');
    }
  });
  if (texts.length === 0) throw new UnsupportedParameterError('input: must not be empty', 'input', 'invalid_value');
  const format = json.encoding_format;
  if (format !== undefined && format !== null && format !== 'float' && format !== 'base64') {
    throw new UnsupportedParameterError('encoding_format: must be float or base64', 'encoding_format', 'invalid_value');
  }
  for (const [key, value] of Object.entries(json)) {
    if (value === undefined || value === null) continue;
    if (key === 'dimensions') {
      if (opts.dimensions === false) policy.unsupported('dimensions', 'this model\'s vectors have a fixed size');
    } else if (!CARRIED.has(key)) {
      policy.unsupported(key, 'not carried by the embeddings translation');
    }
  }
  const dimensions = opts.dimensions === false ? undefined : num(json.dimensions);
  return { texts: texts as string[], single: typeof input === 'string', dimensions, base64: format === 'base64' };
}

function base64Floats(vector: number[]): string {
  return Buffer.from(new Float32Array(vector).buffer).toString('base64');
}

/**
 * OpenAI's embeddings answer (vectors as little-endian float32 in base64 when asked, as OpenAI
 * does). Without a token count in the provider's answer the usage is an estimate (about four
 * characters a token), so token windows and budgets still move.
 */
export function embeddingsResponse(model: string, input: EmbeddingsInput, result: Embeddings): Json {
  const promptTokens = result.promptTokens ?? input.texts.reduce((n, t) => n + estimateTokens(t), 0);
  return {
    object: 'list',
    data: result.vectors.map((v, index) => ({ object: 'embedding', index, embedding: input.base64 ? base64Floats(v) : v })),
    model,
    usage: { prompt_tokens: promptTokens, total_tokens: promptTokens },
  };
}
