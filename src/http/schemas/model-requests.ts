import { z } from 'zod';
import type { Endpoint } from '../../providers/types.ts';

export type JsonEndpoint = Exclude<Endpoint, 'transcriptions'>;

// Loose objects: the gateway checks what it routes and counts on, and forwards every other field
// untouched for the provider to judge (message items included: their shape is the provider's).
// The shapes the providers expect are still documented: `documented` puts them into the JSON
// Schema (the OpenAPI document) of a value the gateway itself takes as it comes.
const model = z.string({ error: 'must be a string' }).trim().min(1, { error: 'must not be empty' });
const stream = z.boolean({ error: 'must be a boolean' }).optional();

type JsonSchema = Record<string, unknown>;

/** A documentation-only JSON Schema of a zod shape (the one the provider checks). */
function documented(shape: z.ZodType): JsonSchema {
  const { $schema: _schema, ...schema } = z.toJSONSchema(shape, { io: 'input' }) as JsonSchema;
  return schema;
}

const contentParts = z.array(z.looseObject({ type: z.string().meta({ description: 'text, image_url, input_audio, file, ...' }) }));
const chatMessage = z.looseObject({
  role: z.string().meta({ description: 'system, developer, user, assistant or tool.' }),
  content: z.union([z.string(), contentParts, z.null()]).optional(),
  name: z.string().optional(),
  tool_calls: z.array(z.looseObject({ id: z.string(), type: z.string(), function: z.looseObject({ name: z.string(), arguments: z.string() }) })).optional(),
  tool_call_id: z.string().optional(),
});
const anthropicMessage = z.looseObject({
  role: z.enum(['user', 'assistant']),
  content: z.union([z.string(), z.array(z.looseObject({ type: z.string().meta({ description: 'text, image, document, tool_use, tool_result, ...' }) }))]),
});
const responsesInput = z.union([z.string(), z.array(z.looseObject({ type: z.string().optional(), role: z.string().optional(), content: z.unknown().optional() }))]);
const embeddingInput = z.union([z.string(), z.array(z.string()), z.array(z.int()), z.array(z.array(z.int()))]);

const messagesOf = (item: z.ZodType, description: string) =>
  z.array(z.unknown(), { error: 'must be an array' }).min(1, { error: 'must not be empty' }).meta({ description, items: documented(item) });

/** `POST /v1/chat/completions` */
export const chatCompletionBody = z.looseObject({ model, messages: messagesOf(chatMessage, 'The conversation; each message goes to the provider as it is.'), stream });
/** `POST /v1/responses` */
export const responsesBody = z.looseObject({
  model,
  input: z.unknown().optional().meta({ description: 'Text, or a list of input items; goes to the provider as it is.', ...documented(responsesInput) }),
  stream,
});
/** `POST /v1/embeddings` */
export const embeddingsBody = z.looseObject({
  model,
  input: z
    .union([z.string(), z.array(z.unknown())], { error: 'must be a string or an array' })
    .meta({ description: 'A text, texts, or token arrays.', ...documented(embeddingInput) }),
});
/** `POST /v1/audio/speech` */
export const speechBody = z.looseObject({ model, input: z.string({ error: 'must be a string' }) });
/** `POST /v1/messages` (Anthropic) */
export const anthropicMessagesBody = z.looseObject({
  model,
  messages: messagesOf(anthropicMessage, 'The conversation; each message goes to the provider as it is.'),
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
