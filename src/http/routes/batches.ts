import type { FastifyInstance } from 'fastify';
import { BatchService } from '../../batch/service.ts';
import { batchObject, deletedFileObject, fileObject } from '../../batch/wire.ts';
import type { HttpServices } from '../context.ts';
import { badRequest } from '../../errors/gateway-error.ts';
import { createBatchBody } from '../schemas/batches.ts';
import { closedBy } from '../dispatch.ts';
import { hasNul, NUL_REFUSAL } from '../schemas/checks.ts';
import { parseBody } from '../validation.ts';

/**
 * Files (`/v1/files`) and batches (`/v1/batches`) in the OpenAI shapes. `POST /v1/batches` and
 * `POST /v1/files` are rate limited: one request against user-path rules, no concurrency slot,
 * provider and model rules skipped (the specification's rule for batch submission).
 */
export function registerBatches(app: FastifyInstance, services: HttpServices): void {
  const batches = new BatchService({
    storage: services.storage, resolver: services.resolver, usage: services.usage, logger: services.options.logger, files: services.options.files, now: services.now,
    observe: (target, result) => services.admission.observe({ provider: target.provider.name, model: target.model }, result),
  });
  // Background runs stop before storage closes (fastify closes before the gateway's cleanup).
  app.addHook('onClose', async () => batches.close());

  app.register(async (scope) => {
    scope.addContentTypeParser('multipart/form-data', { parseAs: 'buffer' }, (_request, body, done) => done(null, body));
    scope.post('/v1/files', async (request, reply) => {
      const form = await parseForm(Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0), request.headers['content-type']);
      const purpose = form.get('purpose');
      if (purpose !== 'batch') throw badRequest('purpose: must be "batch" (the only purpose this gateway stores files for)', 'purpose');
      const file = form.get('file');
      if (!(file instanceof File)) throw badRequest('file: required form field (a file)', 'file');
      if (hasNul(file.name)) throw badRequest(`file: the file name ${NUL_REFUSAL}`, 'file');
      const upload = { filename: file.name || 'upload.jsonl', purpose, content: Buffer.from(await file.arrayBuffer()), ...expiresAfter(form) };
      const stored = await batches.uploadFile(request.identity, upload, async () => {
        // An upload holds no concurrency slot, and costs nothing a budget counts.
        const headers = await services.admission.admitOne(request.identity, {}, { cancel: closedBy(reply), budgets: false });
        if (headers) reply.headers(headers);
      });
      return reply.code(200).send(fileObject(stored));
    });
  });

  app.delete('/v1/files/:id', async (request) => {
    const { id } = request.params as { id: string };
    await batches.deleteFile(request.identity, id);
    return deletedFileObject(id);
  });

  app.get('/v1/files/:id', async (request) => {
    const { id } = request.params as { id: string };
    return fileObject(await batches.getFile(request.identity, id));
  });

  app.get('/v1/files/:id/content', async (request, reply) => {
    const { id } = request.params as { id: string };
    const { content } = await batches.fileContent(request.identity, id);
    return reply.type('application/octet-stream').send(content);
  });

  app.post('/v1/batches', async (request, reply) => {
    const body = parseBody(createBatchBody, request.body);
    const batch = await batches.createBatch(
      request.identity,
      { inputFileId: body.input_file_id, endpoint: body.endpoint, completionWindow: body.completion_window, metadata: body.metadata ?? null },
      async () => {
        // A submission holds no concurrency slot; it stops waiting for capacity when its client leaves.
        const headers = await services.admission.admitOne(request.identity, {}, { cancel: closedBy(reply) });
        if (headers) reply.headers(headers);
      },
    );
    return batchObject(batch);
  });

  app.get('/v1/batches', async (request) => {
    const query = request.query as Record<string, unknown>;
    const after = typeof query.after === 'string' && query.after !== '' ? query.after : undefined;
    const limit = query.limit === undefined ? 20 : Number(query.limit);
    if (!Number.isInteger(limit) || limit < 1 || limit > 100) throw badRequest('limit: must be an integer from 1 to 100', 'limit');
    const page = await batches.listBatches(request.identity, after, limit);
    const data = page.data.map(batchObject);
    return { object: 'list', data, first_id: page.data[0]?.id ?? null, last_id: page.data.at(-1)?.id ?? null, has_more: page.hasMore };
  });

  app.get('/v1/batches/:id', async (request) => {
    const { id } = request.params as { id: string };
    return batchObject(await batches.getBatch(request.identity, id));
  });

  app.post('/v1/batches/:id/cancel', async (request) => {
    const { id } = request.params as { id: string };
    return batchObject(await batches.cancelBatch(request.identity, id));
  });
}

/** OpenAI's `expires_after[anchor]` (only `created_at`) and `expires_after[seconds]` form fields. */
function expiresAfter(form: FormData): { expiresAfterSeconds?: number } {
  const anchor = form.get('expires_after[anchor]');
  const seconds = form.get('expires_after[seconds]');
  if (anchor === null && seconds === null) return {};
  if (anchor !== 'created_at') throw badRequest('expires_after[anchor]: must be "created_at"', 'expires_after');
  if (typeof seconds !== 'string' || !/^\d+$/.test(seconds.trim())) throw badRequest('expires_after[seconds]: required, a whole number of seconds', 'expires_after');
  return { expiresAfterSeconds: Number(seconds.trim()) };
}

async function parseForm(raw: Buffer, contentType: string | undefined): Promise<FormData> {
  if (!contentType?.toLowerCase().startsWith('multipart/form-data')) throw badRequest('file uploads take a multipart/form-data body (fields file and purpose)', null, 'invalid_content_type');
  try {
    return await new Request('http://gateway.invalid/', { method: 'POST', body: new Uint8Array(raw), headers: { 'content-type': contentType } }).formData();
  } catch {
    throw badRequest('malformed multipart/form-data body');
  }
}
