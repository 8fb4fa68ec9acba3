import { z } from 'zod';

/** The endpoints a request can be explained for: the model endpoints, a realtime session, a batch submission. */
export const EXPLAIN_ENDPOINTS = ['chat', 'responses', 'embeddings', 'speech', 'transcriptions', 'messages', 'realtime', 'batches'] as const;
export type ExplainEndpoint = (typeof EXPLAIN_ENDPOINTS)[number];

/** `GET /admin/rate-limits/explain?model&user_path&endpoint` */
export const explainQuery = z.strictObject({
  model: z.string({ error: 'must be a string' }).trim().min(1, { error: 'must not be empty' }).meta({ description: 'A model, provider/model or alias, as a client would send it.' }),
  user_path: z.string({ error: 'must be a string' }).optional().meta({ description: 'The caller\'s user path; default /.' }),
  endpoint: z.enum(EXPLAIN_ENDPOINTS, { error: `must be one of ${EXPLAIN_ENDPOINTS.join(', ')}` }).default('chat'),
});
