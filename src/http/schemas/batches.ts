import { z } from 'zod';
import { hasNul, nulRefusal } from './checks.ts';

/** `POST /v1/batches` */
export const createBatchBody = z.object({
  input_file_id: z.string({ error: 'must be a string' }).min(1, { error: 'must not be empty' }).refine((id) => !hasNul(id), { error: nulRefusal('input_file_id') }),
  endpoint: z.string({ error: 'must be a string' }),
  completion_window: z.literal('24h', { error: 'must be "24h"' }),
  metadata: z.record(z.string(), z.string({ error: 'values must be strings' }), { error: 'must be an object of strings' }).nullable().optional(),
});
