/**
 * A fake Azure OpenAI resource for tests. It checks what Azure checks before answering: the
 * deployment path (`/openai/deployments/{deployment}/...`, a known deployment), the `api-version`
 * query, and the credentials (`api-key`, or `Authorization: Bearer` with a token the fake Entra
 * endpoint issued). An accepted call is answered by a generic fake OpenAI upstream behind it
 * (fake-upstream.ts), as the deployment's model, so its knobs (forced errors, latency, streams)
 * work here too. Realtime sessions at `/openai/realtime?api-version=&deployment=`.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { request } from 'undici';
import { attachFakeRealtime, type FakeRealtime } from './fake-upstream-rtb.ts';
import { startFakeUpstream, type FakeUpstream } from './fake-upstream.ts';
import { startLoopbackServer } from './loopback-server.ts';

export interface FakeAzureOptions {
  /** Deployment name → the model it runs. */
  deployments: Record<string, string>;
  apiVersion: string;
  /** The api-version realtime sessions must ask for. */
  realtimeApiVersion?: string;
  /** Accepted as `api-key`. */
  apiKey?: string;
  /** Accepts a bearer token (e.g. one the fake Entra endpoint issued). */
  acceptsToken?: (token: string) => boolean;
  name?: string;
}

export interface AzureCall {
  method: string;
  path: string;
  query: URLSearchParams;
  headers: IncomingMessage['headers'];
  /** The deployment of the path, or of the body for `/openai/responses`. */
  deployment: string | undefined;
  body: Record<string, unknown> | undefined;
  status: number;
}

export interface FakeAzure {
  readonly url: string;
  readonly calls: AzureCall[];
  /** The fake OpenAI upstream answering accepted calls (its calls, knobs and reset). */
  readonly inner: FakeUpstream;
  readonly realtime: FakeRealtime;
  reset(): void;
  close(): Promise<void>;
}

const azureError = (code: string, message: string): Buffer => Buffer.from(JSON.stringify({ error: { code, message } }));

export async function startFakeAzure(options: FakeAzureOptions): Promise<FakeAzure> {
  const inner = await startFakeUpstream({ name: options.name ?? 'azure' });
  const calls: AzureCall[] = [];

  const authorized = (headers: IncomingMessage['headers']): boolean => {
    if (options.apiKey !== undefined && headers['api-key'] === options.apiKey) return true;
    const bearer = /^Bearer (.+)$/.exec(headers.authorization ?? '')?.[1];
    return bearer !== undefined && options.acceptsToken !== undefined && options.acceptsToken(bearer);
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const raw = Buffer.concat(chunks);
    const url = new URL(req.url ?? '/', 'http://x');
    const isJson = String(req.headers['content-type'] ?? '').includes('json');
    let body: Record<string, unknown> | undefined;
    if (isJson) {
      try {
        body = JSON.parse(raw.toString('utf8')) as Record<string, unknown>;
      } catch {
        body = undefined;
      }
    }
    const deploymentPath = /^\/openai\/deployments\/([^/]+)\/(chat\/completions|embeddings|audio\/speech|audio\/transcriptions)$/.exec(url.pathname);
    const deployment = deploymentPath ? decodeURIComponent(deploymentPath[1]!) : url.pathname === '/openai/responses' ? String(body?.model) : undefined;
    const call: AzureCall = { method: req.method ?? 'GET', path: url.pathname, query: url.searchParams, headers: req.headers, deployment, body, status: 0 };
    calls.push(call);
    const answer = (status: number, payload: Buffer): void => {
      call.status = status;
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(payload);
    };
    // Azure's own order: the key first, then the route and its api-version, then the deployment.
    if (!authorized(req.headers)) {
      return answer(401, azureError('401', 'Access denied due to invalid subscription key or wrong API endpoint.'));
    }
    if (req.method !== 'POST' || deployment === undefined) return answer(404, azureError('404', 'Resource not found'));
    const version = url.searchParams.get('api-version');
    if (version === null) return answer(404, azureError('404', 'Resource not found'));
    if (version !== options.apiVersion) return answer(400, azureError('BadRequest', `API version not supported: ${version}`));
    const model = options.deployments[deployment];
    if (model === undefined) {
      return answer(404, azureError('DeploymentNotFound', 'The API deployment for this resource does not exist.'));
    }
    const rest = deploymentPath ? deploymentPath[2]! : 'responses';
    const forwarded = isJson && body !== undefined ? Buffer.from(JSON.stringify({ ...body, model })) : raw;
    const headers: Record<string, string> = {};
    if (req.headers['content-type']) headers['content-type'] = req.headers['content-type'];
    const up = await request(`${inner.url}/v1/${rest}`, { method: 'POST', headers, body: forwarded });
    call.status = up.statusCode;
    const out: Record<string, string> = {};
    for (const name of ['content-type', 'retry-after', 'retry-after-ms', 'x-fake-upstream']) {
      const v = up.headers[name];
      if (typeof v === 'string') out[name] = v;
    }
    res.writeHead(up.statusCode, out);
    for await (const chunk of up.body) res.write(chunk);
    res.end();
  };

  const http = await startLoopbackServer(handle);
  const realtime = attachFakeRealtime(http.server, (req) => {
    const url = new URL(req.url ?? '/', 'http://x');
    return url.pathname === '/openai/realtime'
      && url.searchParams.get('api-version') === (options.realtimeApiVersion ?? options.apiVersion)
      && options.deployments[url.searchParams.get('deployment') ?? ''] !== undefined
      && authorized(req.headers);
  });
  return {
    url: http.url,
    calls,
    inner,
    realtime,
    reset: () => {
      calls.length = 0;
      inner.reset();
    },
    close: async () => {
      await http.close();
      await inner.close();
    },
  };
}
