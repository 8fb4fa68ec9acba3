import { z } from 'zod';
import { PRIORITIES } from '../../ratelimit/index.ts';
import { normalizeUserPath } from '../../user-path/user-path.ts';
import { checked, hasNul, nulRefusal, valueOf } from './checks.ts';

/**
 * `POST /admin/api-keys`; `user_path` comes out normalised (null: the key is not bound to a path),
 * `max_priority` defaults to normal.
 */
export const createApiKeyBody = z.strictObject({
  name: z.string({ error: 'must be a string' }).trim().min(1, { error: 'must not be empty' }).max(200, { error: 'must be at most 200 characters' }).refine((name) => !hasNul(name), { error: nulRefusal('name') }),
  user_path: z
    .string({ error: 'must be a string' })
    .nullable()
    .optional()
    .transform(checked((raw) => (raw === undefined || raw === null ? null : valueOf(normalizeUserPath(raw, 'user_path'), [])))),
  max_priority: z
    .enum(PRIORITIES, { error: `must be one of ${PRIORITIES.join(', ')}` })
    .default('normal')
    .meta({ description: 'The highest priority the key\'s requests are served at: a request asking above it (X-Floodgate-Priority) is served at this one. Default normal.' }),
});
