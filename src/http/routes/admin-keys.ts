import type { FastifyInstance } from 'fastify';
import type { ApiKeyRecord } from '../../storage/keys/types.ts';
import type { HttpServices } from '../context.ts';
import { notFound } from '../../errors/gateway-error.ts';
import { createApiKeyBody } from '../schemas/admin-keys.ts';
import { parseBody } from '../validation.ts';

/** Managed API keys: the secret is shown once at creation; only its hash is stored. */
export function registerAdminKeys(app: FastifyInstance, services: Pick<HttpServices, 'keys'>): void {
  app.post('/admin/api-keys', async (request, reply) => {
    const body = parseBody(createApiKeyBody, request.body);
    const { record, secret } = await services.keys.create({ name: body.name, userPath: body.user_path, maxPriority: body.max_priority });
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
  return { id: record.id, name: record.name, user_path: record.userPath, max_priority: record.maxPriority, created_at: record.createdAt.toISOString() };
}
