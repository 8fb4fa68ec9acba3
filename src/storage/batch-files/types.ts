/** Files held by the gateway (batch input and output) and the batches it runs or forwards. */

/**
 * A file held by the gateway (batch input or output). `content` is null for a file that lives
 * at a provider (a forwarded batch's output): its bytes are fetched from there on demand.
 */
export interface StoredFile {
  id: string;
  /** Normalised user path of the caller that created it; only that subtree sees it. */
  userPath: string;
  purpose: string;
  filename: string;
  bytes: number;
  createdAt: Date;
  /** When it stops being served and may be removed; null: kept until deleted. */
  expiresAt: Date | null;
  content: Buffer | null;
  /** Provider instance and its file id, for files that live upstream. */
  provider: string | null;
  providerFileId: string | null;
}

/** What one user path holds in live files. */
export interface FileUsage {
  files: number;
  bytes: number;
}

export interface BatchRequestCounts {
  total: number;
  completed: number;
  failed: number;
}

export interface BatchErrorItem {
  code: string;
  message: string;
  param: string | null;
  line: number | null;
}

/** One batch as the gateway tracks it; the OpenAI batch object is derived from it. */
export interface BatchRecord {
  id: string;
  userPath: string;
  apiKeyId: string | null;
  provider: string;
  /** Provider's own model id the batch runs on. */
  model: string;
  /** `/v1/chat/completions`, `/v1/embeddings` or `/v1/responses`. */
  endpoint: string;
  inputFileId: string;
  completionWindow: string;
  /** The provider's batch id for forwarded batches; null when the gateway runs it itself. */
  providerBatchId: string | null;
  status: string;
  outputFileId: string | null;
  errorFileId: string | null;
  requestCounts: BatchRequestCounts;
  metadata: Record<string, string> | null;
  errors: BatchErrorItem[] | null;
  /** Lifecycle times in Unix seconds, named as in the OpenAI batch object (`in_progress_at`, ...). */
  times: Record<string, number>;
  createdAt: Date;
  updatedAt: Date;
}

export interface BatchListQuery {
  /** This user path and below (case-insensitive, like usage queries). */
  userPathPrefix: string;
  /** A batch id: list only batches created before it (newest first). */
  after?: string;
  limit: number;
}

export interface FileRepository {
  /** Throws on a duplicate id. */
  insert(file: StoredFile): Promise<void>;
  /** The file, expired or not. */
  get(id: string): Promise<StoredFile | undefined>;
  /** Returns false when no such file exists. */
  delete(id: string): Promise<boolean>;
  /**
   * The files whose user path is `userPath` exactly (case-insensitive, ASCII), not expired at
   * `at`: how many, and their summed `bytes`.
   */
  usage(userPath: string, at: Date): Promise<FileUsage>;
  /** Removes every file whose expiry is at or before `at`; returns how many. */
  deleteExpired(at: Date): Promise<number>;
}

export interface BatchRepository {
  /** Throws on a duplicate id. */
  insert(batch: BatchRecord): Promise<void>;
  /** Replaces the stored record with the same id; false when there is none. */
  update(batch: BatchRecord): Promise<boolean>;
  get(id: string): Promise<BatchRecord | undefined>;
  /** Newest first (insertion order); `after` pages past a batch id. */
  list(query: BatchListQuery): Promise<BatchRecord[]>;
}
