/**
 * The files and batches tables, as both SQL repositories read and write them, so both store
 * exactly the same columns. Structured fields (counts, metadata,
 * errors, times) are JSON text: they are only ever read back whole, never queried.
 */

import { toDate, toNumber, type StoredTime } from '../shared/values.ts';
import type { BatchRecord, StoredFile } from './types.ts';

export const FILE_COLUMNS = 'id, user_path, purpose, filename, bytes, created_at, content, provider, provider_file_id, expires_at';

export const BATCH_COLUMNS =
  'id, user_path, api_key_id, provider, model, endpoint, input_file_id, completion_window, provider_batch_id, ' +
  'status, output_file_id, error_file_id, request_counts, metadata, errors, times, created_at, updated_at';

export interface FileRow {
  id: string;
  user_path: string;
  purpose: string;
  filename: string;
  bytes: number | string;
  created_at: StoredTime;
  content: Buffer | Uint8Array | null;
  provider: string | null;
  provider_file_id: string | null;
  expires_at: StoredTime | null;
}

export interface BatchRow {
  id: string;
  user_path: string;
  api_key_id: string | null;
  provider: string;
  model: string;
  endpoint: string;
  input_file_id: string;
  completion_window: string;
  provider_batch_id: string | null;
  status: string;
  output_file_id: string | null;
  error_file_id: string | null;
  request_counts: string;
  metadata: string | null;
  errors: string | null;
  times: string;
  created_at: StoredTime;
  updated_at: StoredTime;
}

/** Parameters in FILE_COLUMNS order. */
export function fileParams(file: StoredFile): unknown[] {
  return [
    file.id, file.userPath, file.purpose, file.filename, file.bytes, file.createdAt,
    file.content, file.provider, file.providerFileId, file.expiresAt,
  ];
}

export function fileFromRow(row: FileRow): StoredFile {
  return {
    id: row.id,
    userPath: row.user_path,
    purpose: row.purpose,
    filename: row.filename,
    bytes: toNumber(row.bytes),
    createdAt: toDate(row.created_at),
    expiresAt: row.expires_at === null ? null : toDate(row.expires_at),
    content: row.content === null ? null : Buffer.from(row.content),
    provider: row.provider,
    providerFileId: row.provider_file_id,
  };
}

/** Parameters in BATCH_COLUMNS order. */
export function batchParams(b: BatchRecord): unknown[] {
  return [
    b.id, b.userPath, b.apiKeyId, b.provider, b.model, b.endpoint, b.inputFileId, b.completionWindow,
    b.providerBatchId, b.status, b.outputFileId, b.errorFileId, JSON.stringify(b.requestCounts),
    b.metadata === null ? null : JSON.stringify(b.metadata), b.errors === null ? null : JSON.stringify(b.errors),
    JSON.stringify(b.times), b.createdAt, b.updatedAt,
  ];
}

export function batchFromRow(row: BatchRow): BatchRecord {
  return {
    id: row.id,
    userPath: row.user_path,
    apiKeyId: row.api_key_id,
    provider: row.provider,
    model: row.model,
    endpoint: row.endpoint,
    inputFileId: row.input_file_id,
    completionWindow: row.completion_window,
    providerBatchId: row.provider_batch_id,
    status: row.status,
    outputFileId: row.output_file_id,
    errorFileId: row.error_file_id,
    requestCounts: JSON.parse(row.request_counts) as BatchRecord['requestCounts'],
    metadata: row.metadata === null ? null : (JSON.parse(row.metadata) as Record<string, string>),
    errors: row.errors === null ? null : (JSON.parse(row.errors) as BatchRecord['errors']),
    times: JSON.parse(row.times) as Record<string, number>,
    createdAt: toDate(row.created_at),
    updatedAt: toDate(row.updated_at),
  };
}
