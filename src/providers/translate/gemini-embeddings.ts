/**
 * OpenAI embeddings requests -> Gemini API `embedContent` / `batchEmbedContents` and Vertex AI
 * `predict`, and their answers back to OpenAI's embeddings list.
 */
import { estimateTokens } from '../usage.ts';
import { arr, num, obj } from './json.ts';
import type { Json } from './json.ts';
import { UnsupportedParameterError } from '../types.ts';
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
  vectors: number[][];
  /** Input tokens, when the answer counts them. */
  promptTokens: number | undefined;
}

const IGNORED = new Set(['model', 'input', 'user']);

export function readEmbeddingsRequest(json: Json, policy: UnsupportedPolicy): EmbeddingsInput {
  const input = json.input;
  const texts = typeof input === 'string' ? [input] : arr(input);
  texts.forEach((t, i) => {
    if (typeof t !== 'string') {
      const param = typeof input === 'string' ? 'input' : `input[${i}]`;
      throw new UnsupportedParameterError(`${param}: Gemini embeds text only; token arrays are not accepted`, param, 'invalid_value');
    }
  });
  if (texts.length === 0) throw new UnsupportedParameterError('input: must not be empty', 'input', 'invalid_value');
  const format = json.encoding_format;
  if (format !== undefined && format !== null && format !== 'float' && format !== 'base64') {
    throw new UnsupportedParameterError('encoding_format: must be float or base64', 'encoding_format', 'invalid_value');
  }
  for (const key of Object.keys(json)) {
    if (IGNORED.has(key) || key === 'encoding_format' || key === 'dimensions' || json[key] === undefined || json[key] === null) continue;
    policy.unsupported(key, 'not translated for Gemini embeddings');
  }
  return { texts: texts as string[], single: typeof input === 'string', dimensions: num(json.dimensions), base64: format === 'base64' };
}

function textContent(text: string): Json {
  return { parts: [{ text }] };
}

/** The Gemini API call: `embedContent` for one string, `batchEmbedContents` for a list. */
export function geminiEmbedRequest(model: string, input: EmbeddingsInput): { method: 'embedContent' | 'batchEmbedContents'; body: Json } {
  const dims = input.dimensions === undefined ? {} : { outputDimensionality: input.dimensions };
  if (input.single) return { method: 'embedContent', body: { content: textContent(input.texts[0]!), ...dims } };
  return { method: 'batchEmbedContents', body: { requests: input.texts.map((t) => ({ model: `models/${model}`, content: textContent(t), ...dims })) } };
}

function values(v: unknown): number[] {
  return arr(obj(v)?.values).filter((x): x is number => typeof x === 'number');
}

export function readGeminiEmbeddings(res: Json): Embeddings {
  const vectors = res.embedding !== undefined ? [values(res.embedding)] : arr(res.embeddings).map(values);
  return { vectors, promptTokens: num(obj(res.usageMetadata)?.promptTokenCount) };
}

/** The Vertex AI `predict` body for text embedding models. */
export function vertexPredictBody(input: EmbeddingsInput): Json {
  const body: Json = { instances: input.texts.map((content) => ({ content })) };
  if (input.dimensions !== undefined) body.parameters = { outputDimensionality: input.dimensions };
  return body;
}

export function readVertexPredict(res: Json): Embeddings {
  let tokens = 0;
  let counted = false;
  const vectors = arr(res.predictions).map((p) => {
    const embeddings = obj(obj(p)?.embeddings);
    const count = num(obj(embeddings?.statistics)?.token_count);
    if (count !== undefined) {
      tokens += count;
      counted = true;
    }
    return values(embeddings);
  });
  return { vectors, promptTokens: counted ? tokens : undefined };
}

function base64Floats(vector: number[]): string {
  return Buffer.from(new Float32Array(vector).buffer).toString('base64');
}

/**
 * OpenAI's embeddings answer. Without a token count in the provider's answer the usage is an
 * estimate (about four characters a token), so token windows and budgets still move.
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
