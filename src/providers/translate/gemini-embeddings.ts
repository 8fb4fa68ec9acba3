/**
 * Embeddings inputs (`translate/embeddings.ts`) as Gemini API `embedContent` /
 * `batchEmbedContents` and Vertex AI `predict` calls, and their answers as vectors.
 */
import type { Embeddings, EmbeddingsInput } from './embeddings.ts';
import { arr, num, obj } from './json.ts';
import type { Json } from './json.ts';

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
