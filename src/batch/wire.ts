import type { BatchRecord, StoredFile } from '../storage/batch-files/types.ts';

/** OpenAI's batch lifecycle times; absent ones are null on the wire. */
const TIME_FIELDS = ['in_progress_at', 'expires_at', 'finalizing_at', 'completed_at', 'failed_at', 'expired_at', 'cancelling_at', 'cancelled_at'];

const seconds = (d: Date): number => Math.floor(d.getTime() / 1000);

/** The OpenAI file object. */
export function fileObject(file: StoredFile): Record<string, unknown> {
  return {
    id: file.id,
    object: 'file',
    bytes: file.bytes,
    created_at: seconds(file.createdAt),
    filename: file.filename,
    purpose: file.purpose,
    status: 'processed',
    expires_at: file.expiresAt === null ? null : seconds(file.expiresAt),
    status_details: null,
  };
}

/** The answer to `DELETE /v1/files/{id}`. */
export function deletedFileObject(id: string): Record<string, unknown> {
  return { id, object: 'file', deleted: true };
}

/** The OpenAI batch object, with the gateway's own ids throughout. */
export function batchObject(batch: BatchRecord): Record<string, unknown> {
  const out: Record<string, unknown> = {
    id: batch.id,
    object: 'batch',
    endpoint: batch.endpoint,
    model: batch.model,
    errors: batch.errors === null ? null : { object: 'list', data: batch.errors },
    input_file_id: batch.inputFileId,
    completion_window: batch.completionWindow,
    status: batch.status,
    output_file_id: batch.outputFileId,
    error_file_id: batch.errorFileId,
    created_at: seconds(batch.createdAt),
  };
  for (const field of TIME_FIELDS) out[field] = batch.times[field] ?? null;
  out.request_counts = { ...batch.requestCounts };
  out.metadata = batch.metadata;
  return out;
}

export const TERMINAL_STATUSES = new Set(['completed', 'failed', 'expired', 'cancelled']);
