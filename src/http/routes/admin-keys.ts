import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { ApiKeyRecord } from '../../storage/types.ts';
import { normalizeUserPath } from '../../ratelimit/normalize.ts';
import type { HttpServices } from '../context.ts';
import { badRequest, notFound } from '../errors.ts';
import { parseBody } from '../validation.ts';

const createKeyBody = z.strictObject({
  name: z.string({ error: 'must be a string' }).trim().min(1, { error: 'must not be empty' }).max(200, { error: 'must be at most 200 characters' }),
  user_path: z.string({ error: 'must be a string' }).nullable().optional(),
});

/** Managed API keys: the secret is shown once at creation; only its hash is stored. */
export function registerAdminKeys(app: FastifyInstance, services: HttpServices): void {
  app.post('/admin/api-keys', async (request, reply) => {
    const body = parseBody(createKeyBody, request.body);
    let userPath: string | null = null;
    if (body.user_path !== undefined && body.user_path !== null) {
      const normalized = normalizeUserPath(body.user_path);
      if (!normalized.ok) throw badRequest(normalized.error, 'user_path');
      userPath = normalized.value;
    }
    const { record, secret } = await services.keys.create({ name: body.name, userPath });
    return reply.code(201).send({ ...present(record), key: secret });
  });

  app.get('/admin/api-keys', async () => ({ api_keys: services.keys.list().map(present) }));

  app.delete('/admin/api-keys/:id', async (request) => {
    const { id } = request.params as { id: string };
    if (!(await services.keys.revoke(id))) throw notFound(`API key "${id}" not found`, 'api_key_not_found');
    return { id, deleted: true };
  });
}

function present(record: ApiKeyRecord): Record<string, unknown> {
  return { id: record.id, name: record.name, user_path: record.userPath, created_at: record.createdAt.toISOString() };
}
