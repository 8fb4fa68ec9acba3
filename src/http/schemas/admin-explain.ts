import { z } from 'zod';
import { PRIORITIES } from '../../ratelimit/index.ts';
import { WAIT_SECONDS } from './checks.ts';

/** The endpoints a request can be explained for: the model endpoints, a realtime session, a batch submission. */
export const EXPLAIN_ENDPOINTS = ['chat', 'responses', 'embeddings', 'speech', 'transcriptions', 'messages', 'realtime', 'batches'] as const;
export type ExplainEndpoint = (typeof EXPLAIN_ENDPOINTS)[number];

/** `GET /admin/rate-limits/explain?model&user_path&endpoint` */
export const explainQuery = z.strictObject({
  model: z.string({ error: 'must be a string' }).trim().min(1, { error: 'must not be empty' }).meta({ description: 'A model, provider/model or alias, as a client would send it.' }),
  user_path: z.string({ error: 'must be a string' }).optional().meta({ description: 'The caller\'s user path; default /.' }),
  endpoint: z.enum(EXPLAIN_ENDPOINTS, { error: `must be one of ${EXPLAIN_ENDPOINTS.join(', ')}` }).default('chat'),
  priority: z.enum(PRIORITIES, { error: `must be one of ${PRIORITIES.join(', ')}` }).default('normal').meta({ description: 'The request\'s priority (X-Floodgate-Priority); default normal.' }),
  max_wait: z
    .string({ error: 'must be a string' })
    .regex(WAIT_SECONDS, { error: 'must be a number of seconds >= 0 with at most 3 decimals' })
    .transform(Number)
    .optional()
    .meta({ description: 'How long the request would wait for capacity (X-Floodgate-Max-Wait), in seconds; default rate_limits.queue.default_wait_seconds.' }),
  max_tokens: z
    .string({ error: 'must be a string' })
    .regex(/^[1-9][0-9]{0,8}$/, { error: 'must be a whole number of tokens from 1 to 999999999' })
    .transform(Number)
    .optional()
    .meta({ description: 'With reservations on: the completion tokens the request would allow (its max_tokens); default rate_limits.reservations.default_completion_tokens.' }),
});
