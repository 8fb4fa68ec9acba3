import { z } from 'zod';
import type { Endpoint } from '../../providers/types.ts';

export type JsonEndpoint = Exclude<Endpoint, 'transcriptions'>;

// Loose objects: the gateway checks what it routes and counts on, and forwards every other field
// untouched for the provider to judge (message items included: their shape is the provider's).
const model = z.string({ error: 'must be a string' }).trim().min(1, { error: 'must not be empty' });
const messages = z.array(z.unknown(), { error: 'must be an array' }).min(1, { error: 'must not be empty' });
const stream = z.boolean({ error: 'must be a boolean' }).optional();

/** `POST /v1/chat/completions` */
export const chatCompletionBody = z.looseObject({ model, messages, stream });
/** `POST /v1/responses` */
export const responsesBody = z.looseObject({ model, stream });
/** `POST /v1/embeddings` */
export const embeddingsBody = z.looseObject({
  model,
  input: z.union([z.string(), z.array(z.unknown())], { error: 'must be a string or an array' }),
});
/** `POST /v1/audio/speech` */
export const speechBody = z.looseObject({ model, input: z.string({ error: 'must be a string' }) });
/** `POST /v1/messages` (Anthropic) */
export const anthropicMessagesBody = z.looseObject({
  model,
  messages,
  max_tokens: z.int({ error: 'must be an integer' }).positive({ error: 'must be at least 1' }),
  stream,
});

/** Each JSON model endpoint's body; `model` comes out trimmed. */
export const modelRequestBodies = {
  chat: chatCompletionBody,
  responses: responsesBody,
  embeddings: embeddingsBody,
  speech: speechBody,
  messages: anthropicMessagesBody,
} satisfies Record<JsonEndpoint, z.ZodType<{ model: string; stream?: unknown }>>;
