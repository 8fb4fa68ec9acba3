import { z } from 'zod';
import { hasNul, NUL_REFUSAL, nulRefusal } from './checks.ts';

/** `POST /v1/batches` */
export const createBatchBody = z.object({
  input_file_id: z.string({ error: 'must be a string' }).min(1, { error: 'must not be empty' }).refine((id) => !hasNul(id), { error: nulRefusal('input_file_id') }),
  endpoint: z.string({ error: 'must be a string' }),
  completion_window: z.literal('24h', { error: 'must be "24h"' }),
  metadata: z.record(z.string(), z.string({ error: 'values must be strings' }), { error: 'must be an object of strings' }).nullable().optional(),
});

/** `GET /v1/batches?after&limit` */
export const listBatchesQuery = z.strictObject({
  after: z
    .string({ error: 'must be a batch id' })
    .optional()
    .transform((id) => (id === '' ? undefined : id))
    .meta({ description: 'List the batches created before this one (newest first).' }),
  limit: z
    .string({ error: 'must be an integer from 1 to 100' })
    .regex(/^\d+$/, { error: 'must be an integer from 1 to 100' })
    .transform(Number)
    .pipe(z.int().min(1, { error: 'must be an integer from 1 to 100' }).max(100, { error: 'must be an integer from 1 to 100' }))
    .optional()
    .default(20)
    .meta({ description: 'How many batches at most (1 to 100, default 20).' }),
});

/**
 * `POST /v1/files`: the multipart form's fields. `purpose` must be `batch` (the only purpose this
 * gateway stores files for); OpenAI's `expires_after[anchor]` (`created_at`) and
 * `expires_after[seconds]` come together or not at all.
 */
export const uploadFileForm = z
  .object({
    purpose: z.literal('batch', { error: 'must be "batch" (the only purpose this gateway stores files for)' }),
    file: z
      .instanceof(File, { error: 'file: required form field (a file)' })
      .refine((file) => !hasNul(file.name), { error: `file: the file name ${NUL_REFUSAL}` })
      .meta({ type: 'string', contentMediaType: 'application/octet-stream', description: 'The file\'s bytes (JSONL, one request a line).' }),
    'expires_after[anchor]': z
      .literal('created_at', { error: 'must be "created_at"' })
      .optional()
      .meta({ description: 'With `expires_after[seconds]`: the file expires that long after its upload.' }),
    'expires_after[seconds]': z
      .string({ error: 'must be a whole number of seconds' })
      .trim()
      .regex(/^\d+$/, { error: 'must be a whole number of seconds' })
      .transform(Number)
      .optional()
      .meta({ description: 'From 1 to `files.ttl_seconds` (the default life of a file).' }),
  })
  .refine((form) => (form['expires_after[anchor]'] === undefined) === (form['expires_after[seconds]'] === undefined), {
    error: 'expires_after[anchor] and expires_after[seconds] come together',
    path: ['expires_after'],
  });
