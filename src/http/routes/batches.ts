import type { FastifyInstance } from 'fastify';
import { batchObject, deletedFileObject, fileObject } from '../../batch/wire.ts';
import type { HttpServices } from '../context.ts';
import { badRequest } from '../../errors/gateway-error.ts';
import { createBatchBody, listBatchesQuery, uploadFileForm } from '../schemas/batches.ts';
import { closedBy } from '../dispatch.ts';
import { parseBody } from '../validation.ts';

/**
 * Files (`/v1/files`) and batches (`/v1/batches`) in the OpenAI shapes. `POST /v1/batches` and
 * `POST /v1/files` are rate limited: one request against user-path rules, no concurrency slot,
 * provider and model rules skipped (the specification's rule for batch submission).
 */
export function registerBatches(app: FastifyInstance, services: Pick<HttpServices, 'batches' | 'admission'>): void {
  const { batches } = services;

  app.register(async (scope) => {
    scope.addContentTypeParser('multipart/form-data', { parseAs: 'buffer' }, (_request, body, done) => done(null, body));
    scope.post('/v1/files', async (request, reply) => {
      const form = await parseForm(Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0), request.headers['content-type']);
      const fields = parseBody(uploadFileForm, Object.fromEntries(form.entries()));
      const file = fields.file;
      const upload = {
        filename: file.name || 'upload.jsonl',
        purpose: fields.purpose,
        content: Buffer.from(await file.arrayBuffer()),
        ...(fields['expires_after[seconds]'] !== undefined && { expiresAfterSeconds: fields['expires_after[seconds]'] }),
      };
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
    const { after, limit } = parseBody(listBatchesQuery, request.query);
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

async function parseForm(raw: Buffer, contentType: string | undefined): Promise<FormData> {
  if (!contentType?.toLowerCase().startsWith('multipart/form-data')) throw badRequest('file uploads take a multipart/form-data body (fields file and purpose)', null, 'invalid_content_type');
  try {
    return await new Request('http://gateway.invalid/', { method: 'POST', body: new Uint8Array(raw), headers: { 'content-type': contentType } }).formData();
  } catch {
    throw badRequest('malformed multipart/form-data body');
  }
}
