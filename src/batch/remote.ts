import { Cancellation } from '../providers/cancellation.ts';
import type { Provider } from '../providers/types.ts';
import { readBody } from '../providers/results.ts';
import { asGatewayError, upstreamError } from '../errors/from-provider.ts';
import { GatewayError } from '../errors/gateway-error.ts';
import { isRecord } from '../shared/json.ts';

/**
 * The OpenAI Files and Batches API of a provider whose batch ability is `forward`, called through
 * the provider's passthrough (its base URL and credentials). Non-2xx answers become provider_error 4xx/5xx.
 */
export class RemoteBatches {
  private readonly provider: Provider;

  constructor(provider: Provider) {
    this.provider = provider;
  }

  async uploadFile(filename: string, content: Buffer): Promise<string> {
    const form = new FormData();
    form.append('purpose', 'batch');
    form.append('file', new Blob([new Uint8Array(content)], { type: 'application/jsonl' }), filename);
    const encoded = new Response(form);
    const body = Buffer.from(await encoded.arrayBuffer());
    const json = await this.json('POST', '/files', body, encoded.headers.get('content-type') ?? 'multipart/form-data');
    return idOf(json, 'file upload');
  }

  async createBatch(request: Record<string, unknown>): Promise<Record<string, unknown>> {
    return this.json('POST', '/batches', Buffer.from(JSON.stringify(request)), 'application/json');
  }

  async getBatch(id: string): Promise<Record<string, unknown>> {
    return this.json('GET', `/batches/${encodeURIComponent(id)}`);
  }

  async cancelBatch(id: string): Promise<Record<string, unknown>> {
    return this.json('POST', `/batches/${encodeURIComponent(id)}/cancel`);
  }

  /** Deletes a file at the provider; one the provider no longer has counts as deleted. */
  async deleteFile(id: string): Promise<void> {
    try {
      await this.call('DELETE', `/files/${encodeURIComponent(id)}`);
    } catch (err) {
      if (!(err instanceof GatewayError && err.status === 404)) throw err;
    }
  }

  async fileContent(id: string): Promise<Buffer> {
    return (await this.call('GET', `/files/${encodeURIComponent(id)}/content`)).body;
  }

  private async json(method: string, path: string, body?: Buffer, contentType?: string): Promise<Record<string, unknown>> {
    const res = await this.call(method, path, body, contentType);
    try {
      const parsed: unknown = JSON.parse(res.body.toString('utf8'));
      if (isRecord(parsed)) return parsed;
    } catch {
      // reported below
    }
    throw upstreamError(502, Buffer.from(`provider ${this.provider.name} answered ${method} ${path} with a body that is not a JSON object`), {});
  }

  private async call(method: string, path: string, body?: Buffer, contentType?: string): Promise<{ body: Buffer }> {
    const headers: Record<string, string> = contentType ? { 'content-type': contentType } : {};
    let status: number;
    let buf: Buffer;
    let answerHeaders: Record<string, string>;
    try {
      const result = await this.provider.passthrough({ method, path, headers, body, cancel: Cancellation.fromSignal(AbortSignal.timeout(60_000)), buffered: true });
      status = result.status;
      answerHeaders = result.headers;
      buf = await readBody(result.body);
    } catch (err) {
      throw asGatewayError(err, this.provider.name);
    }
    if (status >= 400) throw upstreamError(status, buf, answerHeaders);
    return { body: buf };
  }
}

function idOf(json: Record<string, unknown>, what: string): string {
  if (typeof json.id === 'string' && json.id !== '') return json.id;
  throw upstreamError(502, Buffer.from(`${what}: the provider's answer has no id`), {});
}
