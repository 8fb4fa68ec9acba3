import { createHash, randomBytes } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import type { AdmissionCore } from '../admission/core.ts';
import { Cancellation } from '../providers/cancellation.ts';
import type { ProviderResult } from '../providers/types.ts';
import { GatewayError, badRequest, notFound, unsupportedByProvider } from '../errors/gateway-error.ts';
import type { Resolver } from '../routing/resolver.ts';
import type { Target } from '../routing/types.ts';
import type { BatchRecord, StoredFile } from '../storage/batch-files/types.ts';
import type { Storage } from '../storage/types.ts';
import { isRecord } from '../shared/json.ts';
import { isUnder } from '../user-path/user-path.ts';
import { BATCH_ENDPOINTS, parseBatchInput, type BatchLine } from './jsonl.ts';
import { lineRequestId, outputLine, runLines, type LineOutcome, type LineRefusal } from './line-runner.ts';
import { RemoteBatches } from './remote.ts';
import { TERMINAL_STATUSES } from './wire.ts';

/** Who creates and may see a file or batch: the caller's user path and managed key id. */
export interface Owner {
  userPath: string;
  /** Managed key id, or null for the master key / open mode. */
  keyId: string | null;
}

/** How long files are kept, and how much one user path may keep (`files.*`). */
export interface FileLimits {
  ttlSeconds: number;
  maxBytesPerUserPath: number;
  maxFilesPerUserPath: number;
}

export interface BatchServiceOptions {
  storage: Storage;
  resolver: Resolver;
  /**
   * The admission core: the budgets each line the gateway runs is checked against, and the usage
   * record of every line that ran.
   */
  admission: Pick<AdmissionCore, 'budgetBreach' | 'complete' | 'observe'>;
  logger: FastifyBaseLogger;
  files: FileLimits;
  now(): number;
}

/** An upload as the route read it from the form. */
export interface NewFile {
  filename: string;
  purpose: string;
  content: Buffer;
  /** `expires_after[seconds]`: a shorter life than `files.ttl_seconds`. */
  expiresAfterSeconds?: number;
}

export interface NewBatch {
  inputFileId: string;
  endpoint: string;
  completionWindow: string;
  metadata: Record<string, string> | null;
}

const DAY_SECONDS = 86_400;
/** How often expired files are removed from storage (reads never serve them, removed or not). */
const SWEEP_INTERVAL_MS = 60_000;

/**
 * Files and batches. The gateway keeps uploaded files itself; a batch is run the way its provider's
 * batch ability says: forwarded to the provider's own Batches API (file uploaded, batch created, ids
 * mapped back), or run by the gateway line by line in the background. Every object remembers the user path that created it
 * and is visible to that path's subtree only; anything else is answered as not found.
 */
export class BatchService {
  private readonly opts: BatchServiceOptions;
  private readonly running = new Map<string, { cancel: boolean; done: Promise<void> }>();
  /** Cancelled on close(): batches the gateway runs stop between lines, and their calls are abandoned. */
  private readonly shutdown = Cancellation.shared();
  /** The last upload of each user path (lower case): a path's uploads are checked against its quota one at a time. */
  private readonly uploads = new Map<string, Promise<unknown>>();
  private readonly sweeper: NodeJS.Timeout;

  constructor(opts: BatchServiceOptions) {
    this.opts = opts;
    this.sweeper = setInterval(() => void this.sweep(), SWEEP_INTERVAL_MS);
    this.sweeper.unref();
  }

  /**
   * Stores an upload once the caller's user path has room for it (`files.max_*_per_user_path`,
   * counting its live files, batch output included) and `admit` let it through; a path's uploads
   * are checked one at a time, so concurrent uploads cannot overrun the quota together.
   */
  async uploadFile(owner: Owner, upload: NewFile, admit: () => Promise<void>): Promise<StoredFile> {
    const ttl = this.opts.files.ttlSeconds;
    const life = upload.expiresAfterSeconds;
    if (life !== undefined && (!Number.isInteger(life) || life < 1 || life > ttl)) {
      throw badRequest(`expires_after[seconds]: must be an integer from 1 to ${ttl} (files.ttl_seconds)`, 'expires_after');
    }
    return this.oneAtATime(owner.userPath.toLowerCase(), async () => {
      await this.checkQuota(owner.userPath, upload.content.length);
      await admit();
      return this.storeFile(owner, upload.filename, upload.purpose, upload.content, life ?? ttl);
    });
  }

  /** A file of the caller's subtree that has not expired; an expired one is removed. */
  async getFile(owner: Owner, id: string): Promise<StoredFile> {
    const file = await this.opts.storage.files.get(id);
    if (file === undefined || !isUnder(file.userPath, owner.userPath)) throw notFound(`file "${id}" not found`, 'file_not_found');
    if (file.expiresAt !== null && file.expiresAt.getTime() <= this.opts.now()) {
      await this.opts.storage.files.delete(id);
      throw notFound(`file "${id}" has expired (at ${file.expiresAt.toISOString()}) and was removed`, 'file_not_found');
    }
    return file;
  }

  /** Deletes a file of the caller's subtree; one that lives at a provider is deleted there first. */
  async deleteFile(owner: Owner, id: string): Promise<void> {
    const file = await this.getFile(owner, id);
    const provider = file.provider === null ? undefined : this.opts.resolver.provider(file.provider);
    if (provider !== undefined && file.providerFileId !== null) await new RemoteBatches(provider).deleteFile(file.providerFileId);
    await this.opts.storage.files.delete(id);
  }

  async fileContent(owner: Owner, id: string): Promise<{ file: StoredFile; content: Buffer }> {
    const file = await this.getFile(owner, id);
    if (file.content !== null) return { file, content: file.content };
    const provider = file.provider === null ? undefined : this.opts.resolver.provider(file.provider);
    if (provider === undefined || file.providerFileId === null) throw notFound(`file "${id}" is no longer available`, 'file_not_found');
    return { file, content: await new RemoteBatches(provider).fileContent(file.providerFileId) };
  }

  /**
   * Validates everything a submission needs (file, JSONL, model, provider type) before `admit`
   * runs, so a malformed submission is not counted; then submits.
   */
  async createBatch(owner: Owner, input: NewBatch, admit: () => Promise<void>): Promise<BatchRecord> {
    const endpoint = BATCH_ENDPOINTS[input.endpoint];
    if (endpoint === undefined) throw badRequest(`endpoint: must be one of ${Object.keys(BATCH_ENDPOINTS).join(', ')}`, 'endpoint');
    let file: StoredFile;
    try {
      file = await this.getFile(owner, input.inputFileId);
    } catch (err) {
      // Deleted, expired or never there: the submission names the field it came from.
      if (err instanceof GatewayError) throw new GatewayError({ status: err.status, type: err.type, message: `input_file_id: ${err.message}`, param: 'input_file_id', code: err.code });
      throw err;
    }
    if (file.content === null) throw badRequest('input_file_id: must be a file uploaded with purpose "batch"', 'input_file_id');
    const { model, lines } = parseBatchInput(file.content, input.endpoint);
    const route = this.opts.resolver.resolve(model);
    if (!route) throw notFound(`model "${model}" not found`, 'model_not_found');
    const target = route.first;
    const ability = target.provider.batch;
    if (ability === undefined) throw unsupportedByProvider('batches', target.provider, 'input_file_id');
    await admit();

    const now = this.opts.now();
    const batch: BatchRecord = {
      id: `batch_${randomBytes(12).toString('hex')}`,
      userPath: owner.userPath,
      apiKeyId: owner.keyId,
      provider: target.provider.name,
      model: target.model,
      endpoint: input.endpoint,
      inputFileId: file.id,
      completionWindow: input.completionWindow,
      providerBatchId: null,
      status: 'validating',
      outputFileId: null,
      errorFileId: null,
      requestCounts: { total: lines.length, completed: 0, failed: 0 },
      metadata: input.metadata,
      errors: null,
      times: { expires_at: Math.floor(now / 1000) + DAY_SECONDS },
      createdAt: new Date(now),
      updatedAt: new Date(now),
    };
    if (ability.mode === 'forward') {
      const remote = new RemoteBatches(target.provider);
      // The provider must see its own model id, not the gateway's `provider/model` name.
      const content = Buffer.from(lines.map((l) => JSON.stringify({ custom_id: l.customId, method: 'POST', url: input.endpoint, body: { ...l.body, model: target.model } })).join('\n') + '\n');
      const providerFileId = await remote.uploadFile(file.filename, content);
      const created = await remote.createBatch({
        input_file_id: providerFileId,
        endpoint: input.endpoint,
        completion_window: input.completionWindow,
        ...(input.metadata === null ? {} : { metadata: input.metadata }),
      });
      batch.providerBatchId = typeof created.id === 'string' ? created.id : null;
      await this.applyRemote(batch, created);
      await this.opts.storage.batches.insert(batch);
      return batch;
    }
    await this.opts.storage.batches.insert(batch);
    this.start(batch, target, lines);
    return batch;
  }

  async getBatch(owner: Owner, id: string): Promise<BatchRecord> {
    const batch = await this.opts.storage.batches.get(id);
    if (batch === undefined || !isUnder(batch.userPath, owner.userPath)) throw notFound(`batch "${id}" not found`, 'batch_not_found');
    return this.refresh(batch);
  }

  async listBatches(owner: Owner, after: string | undefined, limit: number): Promise<{ data: BatchRecord[]; hasMore: boolean }> {
    const rows = await this.opts.storage.batches.list({ userPathPrefix: owner.userPath, limit: limit + 1, ...(after === undefined ? {} : { after }) });
    const page = rows.slice(0, limit);
    return { data: await Promise.all(page.map((b) => this.refresh(b))), hasMore: rows.length > limit };
  }

  async cancelBatch(owner: Owner, id: string): Promise<BatchRecord> {
    const batch = await this.getBatch(owner, id);
    if (TERMINAL_STATUSES.has(batch.status) || batch.status === 'cancelling') return batch;
    const provider = this.opts.resolver.provider(batch.provider);
    if (batch.providerBatchId !== null && provider !== undefined) {
      await this.applyRemote(batch, await new RemoteBatches(provider).cancelBatch(batch.providerBatchId));
      await this.opts.storage.batches.update(batch);
      return batch;
    }
    const run = this.running.get(batch.id);
    batch.status = run === undefined ? 'cancelled' : 'cancelling';
    batch.times[run === undefined ? 'cancelled_at' : 'cancelling_at'] = Math.floor(this.opts.now() / 1000);
    batch.updatedAt = new Date(this.opts.now());
    await this.opts.storage.batches.update(batch);
    if (run !== undefined) run.cancel = true;
    return batch;
  }

  /** Stops background runs (they end between two lines) and waits for them. */
  async close(): Promise<void> {
    clearInterval(this.sweeper);
    for (const run of this.running.values()) run.cancel = true;
    this.shutdown.cancel();
    await Promise.allSettled([...this.running.values()].map((r) => r.done));
  }

  /** A forwarded batch that is not finished yet is re-read from its provider. */
  private async refresh(batch: BatchRecord): Promise<BatchRecord> {
    if (batch.providerBatchId === null || TERMINAL_STATUSES.has(batch.status)) return batch;
    const provider = this.opts.resolver.provider(batch.provider);
    if (provider === undefined) return batch;
    await this.applyRemote(batch, await new RemoteBatches(provider).getBatch(batch.providerBatchId));
    await this.opts.storage.batches.update(batch);
    return batch;
  }

  /** Copies a provider's batch object into the record, with its file ids mapped to gateway files. */
  private async applyRemote(batch: BatchRecord, remote: Record<string, unknown>): Promise<void> {
    if (typeof remote.status === 'string') batch.status = remote.status;
    const counts = remote.request_counts;
    if (isRecord(counts)) {
      batch.requestCounts = { total: num(counts.total), completed: num(counts.completed), failed: num(counts.failed) };
    }
    for (const [key, value] of Object.entries(remote)) {
      if (key.endsWith('_at') && key !== 'created_at' && typeof value === 'number') batch.times[key] = value;
    }
    const errors = isRecord(remote.errors) && Array.isArray(remote.errors.data) ? remote.errors.data : undefined;
    if (errors !== undefined) {
      batch.errors = errors.filter(isRecord).map((e) => ({
        code: String(e.code ?? 'error'), message: String(e.message ?? ''), param: typeof e.param === 'string' ? e.param : null, line: typeof e.line === 'number' ? e.line : null,
      }));
    }
    batch.outputFileId = await this.remoteFile(batch, remote.output_file_id, batch.outputFileId);
    batch.errorFileId = await this.remoteFile(batch, remote.error_file_id, batch.errorFileId);
    batch.updatedAt = new Date(this.opts.now());
  }

  /** A provider's file as a gateway file id (stable: derived from provider and provider id). */
  private async remoteFile(batch: BatchRecord, providerFileId: unknown, current: string | null): Promise<string | null> {
    if (typeof providerFileId !== 'string' || providerFileId === '') return current;
    const id = `file-${createHash('sha256').update(`${batch.provider}\u0000${providerFileId}`).digest('hex').slice(0, 24)}`;
    if ((await this.opts.storage.files.get(id)) === undefined) {
      const now = this.opts.now();
      await this.opts.storage.files.insert({
        id, userPath: batch.userPath, purpose: 'batch_output', filename: `${batch.id}_output.jsonl`, bytes: 0,
        createdAt: new Date(now), expiresAt: new Date(now + this.opts.files.ttlSeconds * 1000), content: null, provider: batch.provider, providerFileId,
      }).catch(async (err: unknown) => {
        // A concurrent refresh may have inserted it first.
        if ((await this.opts.storage.files.get(id)) === undefined) throw err;
      });
    }
    return id;
  }

  private start(batch: BatchRecord, target: Target, lines: readonly BatchLine[]): void {
    const run = { cancel: false, done: Promise.resolve() };
    run.done = this.execute(batch, target, lines, () => run.cancel)
      .catch((err: unknown) => this.opts.logger.error({ err, batch: batch.id }, 'batch run failed'))
      .finally(() => this.running.delete(batch.id));
    this.running.set(batch.id, run);
  }

  private async execute(batch: BatchRecord, target: Target, lines: readonly BatchLine[], cancelled: () => boolean): Promise<void> {
    const { storage, now } = this.opts;
    const secs = (): number => Math.floor(now() / 1000);
    await new Promise((resolve) => setImmediate(resolve));
    batch.status = 'in_progress';
    batch.times.in_progress_at = secs();
    batch.updatedAt = new Date(now());
    await storage.batches.update(batch);

    const output: string[] = [];
    const failed: string[] = [];
    let index = 0;
    // Each answer says what it says of the provider's capacity, like any other (learned capacity).
    const observe = (result: ProviderResult): void => this.opts.admission.observe({ provider: target.provider.name, model: target.model }, result);
    await runLines(target, BATCH_ENDPOINTS[batch.endpoint]!, lines, this.shutdown, now, observe, async (outcome: LineOutcome) => {
      const at = index++;
      const line = outputLine(batch, at, outcome);
      if (outcome.status < 400) {
        output.push(line);
        batch.requestCounts.completed += 1;
      } else {
        failed.push(line);
        batch.requestCounts.failed += 1;
      }
      if (outcome.ran) this.recordUsage(batch, target, outcome, lineRequestId(batch, at));
    }, cancelled, () => this.budgetRefusal(batch.userPath));

    batch.times.finalizing_at = secs();
    if (output.length > 0) batch.outputFileId = (await this.writeOutput(batch, output, 'output')).id;
    if (failed.length > 0) batch.errorFileId = (await this.writeOutput(batch, failed, 'error')).id;
    const stopped = cancelled() || this.shutdown.cancelled;
    batch.status = stopped ? 'cancelled' : 'completed';
    batch.times[stopped ? 'cancelled_at' : 'completed_at'] = secs();
    batch.updatedAt = new Date(now());
    await storage.batches.update(batch);
  }

  /** Output is always written (it counts toward the path's quota for later uploads, never refused). */
  private async writeOutput(batch: BatchRecord, lines: string[], kind: 'output' | 'error'): Promise<StoredFile> {
    const content = Buffer.from(lines.join('\n') + '\n');
    return this.storeFile({ userPath: batch.userPath, keyId: batch.apiKeyId }, `${batch.id}_${kind}.jsonl`, 'batch_output', content, this.opts.files.ttlSeconds);
  }

  private async storeFile(owner: Owner, filename: string, purpose: string, content: Buffer, lifeSeconds: number): Promise<StoredFile> {
    const now = this.opts.now();
    const file: StoredFile = {
      id: `file-${randomBytes(12).toString('hex')}`,
      userPath: owner.userPath,
      purpose,
      filename,
      bytes: content.length,
      createdAt: new Date(now),
      expiresAt: new Date(now + lifeSeconds * 1000),
      content,
      provider: null,
      providerFileId: null,
    };
    await this.opts.storage.files.insert(file);
    return file;
  }

  private async checkQuota(userPath: string, bytes: number): Promise<void> {
    const { maxBytesPerUserPath: maxBytes, maxFilesPerUserPath: maxFiles } = this.opts.files;
    const held = await this.opts.storage.files.usage(userPath, new Date(this.opts.now()));
    const over = held.files + 1 > maxFiles
      ? `it holds ${held.files} files, the most a user path may keep (files.max_files_per_user_path ${maxFiles})`
      : held.bytes + bytes > maxBytes
        ? `it holds ${held.bytes} bytes in files and this upload of ${bytes} bytes would pass files.max_bytes_per_user_path (${maxBytes})`
        : undefined;
    if (over === undefined) return;
    throw new GatewayError({
      status: 403,
      type: 'invalid_request_error',
      message: `file quota of user path ${userPath} exceeded: ${over}; delete files (DELETE /v1/files/{id}) or wait for them to expire`,
      param: 'file',
      code: 'file_quota_exceeded',
    });
  }

  private async oneAtATime<T>(key: string, task: () => Promise<T>): Promise<T> {
    const previous = this.uploads.get(key) ?? Promise.resolve();
    const result = previous.then(task, task);
    const settled = result.then(noop, noop);
    this.uploads.set(key, settled);
    void settled.then(() => {
      if (this.uploads.get(key) === settled) this.uploads.delete(key);
    });
    return result;
  }

  private async sweep(): Promise<void> {
    try {
      const removed = await this.opts.storage.files.deleteExpired(new Date(this.opts.now()));
      if (removed > 0) this.opts.logger.info({ removed }, 'removed expired files');
    } catch (err) {
      this.opts.logger.warn({ err }, 'removing expired files failed; the next sweep tries again');
    }
  }

  /**
   * A line of a batch whose budget is reached does not run: it fails like a request would, with
   * a 429 `budget_exceeded` in the error file (the budget may have room again for later lines).
   */
  private budgetRefusal(userPath: string): LineRefusal | undefined {
    const breach = this.opts.admission.budgetBreach(userPath);
    if (breach === undefined) return undefined;
    return { status: 429, body: { error: { message: breach.message, type: 'rate_limit_error', param: null, code: 'budget_exceeded' } } };
  }

  /** Executed lines are recorded as usage (endpoint `batch`); they are not charged to rate-limit windows. */
  private recordUsage(batch: BatchRecord, target: Target, outcome: LineOutcome, requestId: string): void {
    this.opts.admission.complete({ userPath: batch.userPath, keyId: batch.apiKeyId }, {
      provider: target.provider.name,
      model: target.model,
      endpoint: 'batch',
      usage: outcome.usage,
      status: outcome.status,
      startedAt: this.opts.now() - outcome.latencyMs,
      cached: false,
      requestId,
      windows: false,
    });
  }
}

function noop(): void {}

function num(value: unknown): number {
  return typeof value === 'number' && Number.isFinite(value) ? value : 0;
}
