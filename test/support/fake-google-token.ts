/**
 * Google's side of Vertex AI credentials, faked on 127.0.0.1: an OAuth token endpoint that takes
 * a service account's JWT grant and checks it as Google does (RS256 signature against the key's
 * public half, issuer, audience = the token URI, scope, lifetime), and a GCE metadata server that
 * hands out tokens for application-default credentials. Plus a throwaway service-account key file.
 */
import { generateKeyPairSync, randomBytes, verify, type KeyObject } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startLoopbackServer } from './loopback-server.ts';

export const CLOUD_PLATFORM_SCOPE = 'https://www.googleapis.com/auth/cloud-platform';

export interface ServiceAccount {
  /** Path of the key file (JSON, as the Cloud console downloads it). */
  file: string;
  clientEmail: string;
  publicKey: KeyObject;
}

/** A fresh RSA key and its service-account key file naming `tokenUri`. */
export function makeServiceAccount(tokenUri: string, clientEmail = 'floodgate-test@test-project.iam.gserviceaccount.com'): ServiceAccount {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const dir = mkdtempSync(join(tmpdir(), 'floodgate-sa-'));
  const file = join(dir, 'service-account.json');
  writeFileSync(file, JSON.stringify({
    type: 'service_account',
    project_id: 'test-project',
    private_key_id: randomBytes(20).toString('hex'),
    private_key: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
    client_email: clientEmail,
    client_id: '100000000000000000001',
    auth_uri: 'https://accounts.google.com/o/oauth2/auth',
    token_uri: tokenUri,
    universe_domain: 'googleapis.com',
  }, null, 2));
  return { file, clientEmail, publicKey };
}

export interface Grant {
  iss: string;
  aud: string;
  scope: string;
  iat: number;
  exp: number;
}

export interface FakeGoogleToken {
  readonly url: string;
  /** The token endpoint, as a key file's `token_uri`. */
  readonly tokenUri: string;
  /** JWT grants that passed every check. */
  readonly grants: Grant[];
  /** Grants refused, with why. */
  readonly refused: string[];
  /** Requests for a token from the metadata server. */
  readonly metadataTokenRequests: number;
  /** Whether a bearer token is one this server issued and has not yet expired. */
  accepts(token: string): boolean;
  /** The service account whose grants are accepted. */
  trust(account: ServiceAccount): void;
  /** Lifetime of the tokens issued from now on, in seconds. */
  setExpiresIn(seconds: number): void;
  /** The next `n` grants are answered with this status and an OAuth error. */
  failNext(n: number, status: number): void;
  close(): Promise<void>;
}

const b64json = (part: string): Record<string, unknown> => JSON.parse(Buffer.from(part, 'base64url').toString('utf8')) as Record<string, unknown>;

export async function startFakeGoogleToken(options: { expiresIn?: number } = {}): Promise<FakeGoogleToken> {
  const grants: Grant[] = [];
  const refused: string[] = [];
  const issued = new Map<string, number>();
  let account: ServiceAccount | undefined;
  let expiresIn = options.expiresIn ?? 3600;
  let failures: number[] = [];
  let metadataTokenRequests = 0;
  let tokenUri = '';

  const json = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void => {
    res.writeHead(status, { 'content-type': 'application/json', ...headers });
    res.end(JSON.stringify(body));
  };

  const issue = (): { access_token: string; expires_in: number; token_type: string } => {
    const token = `ya29.fake-${randomBytes(16).toString('hex')}`;
    issued.set(token, Date.now() + expiresIn * 1000);
    return { access_token: token, expires_in: expiresIn, token_type: 'Bearer' };
  };

  /** Why a JWT grant is refused, or undefined when Google would accept it. */
  const check = (assertion: string): string | undefined => {
    if (!account) return 'no service account trusted';
    const parts = assertion.split('.');
    if (parts.length !== 3) return 'assertion is not a JWT';
    const [h, p, s] = parts as [string, string, string];
    const header = b64json(h);
    if (header.alg !== 'RS256') return `alg ${String(header.alg)} instead of RS256`;
    if (!verify('RSA-SHA256', Buffer.from(`${h}.${p}`), account.publicKey, Buffer.from(s, 'base64url'))) return 'invalid JWT signature';
    const claims = b64json(p) as unknown as Grant;
    const now = Math.floor(Date.now() / 1000);
    if (claims.iss !== account.clientEmail) return `iss ${claims.iss}`;
    if (claims.aud !== tokenUri) return `aud ${claims.aud} instead of ${tokenUri}`;
    if (typeof claims.scope !== 'string' || !claims.scope.split(' ').includes(CLOUD_PLATFORM_SCOPE)) return `scope ${String(claims.scope)}`;
    if (!(claims.iat <= now + 60 && claims.exp > now && claims.exp - claims.iat <= 3600)) return 'bad iat/exp';
    grants.push(claims);
    return undefined;
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const url = new URL(req.url ?? '/', 'http://x');
    if (url.pathname.startsWith('/computeMetadata/v1/')) {
      const flavor = { 'metadata-flavor': 'Google' };
      if (req.headers['metadata-flavor'] !== 'Google') return json(res, 403, { error: 'Missing Metadata-Flavor:Google header.' }, flavor);
      if (url.pathname === '/computeMetadata/v1/instance/service-accounts/default/token') {
        metadataTokenRequests++;
        return json(res, 200, issue(), flavor);
      }
      return json(res, 200, {}, flavor);
    }
    if (req.method !== 'POST' || url.pathname !== '/token') return json(res, 404, { error: 'not_found' });
    if (!String(req.headers['content-type']).startsWith('application/x-www-form-urlencoded')) {
      return json(res, 400, { error: 'invalid_request', error_description: 'expected a form body' });
    }
    const form = new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
    if (form.get('grant_type') !== 'urn:ietf:params:oauth:grant-type:jwt-bearer') {
      return json(res, 400, { error: 'unsupported_grant_type', error_description: `grant_type ${String(form.get('grant_type'))}` });
    }
    const forced = failures.shift();
    if (forced !== undefined) return json(res, forced, { error: 'invalid_grant', error_description: 'Invalid JWT Signature.' });
    const why = check(form.get('assertion') ?? '');
    if (why !== undefined) {
      refused.push(why);
      return json(res, 400, { error: 'invalid_grant', error_description: why });
    }
    return json(res, 200, issue());
  };

  const http = await startLoopbackServer(handle);
  tokenUri = `${http.url}/token`;
  return {
    url: http.url,
    tokenUri,
    grants,
    refused,
    get metadataTokenRequests() {
      return metadataTokenRequests;
    },
    accepts: (token) => (issued.get(token) ?? 0) > Date.now(),
    trust: (a) => { account = a; },
    setExpiresIn: (s) => { expiresIn = s; },
    failNext: (n, status) => { failures = [...failures, ...Array.from({ length: n }, () => status)]; },
    close: http.close,
  };
}
