/**
 * A fake Microsoft Entra ID token endpoint for tests, over HTTPS as Microsoft's identity library
 * requires (a test-only certificate for 127.0.0.1 in test/support/tls, made trusted in this
 * process by `trustTestCertificate`). It serves the tenant's OpenID configuration and the v2.0
 * token endpoint's client-credentials grant, checking the client id, secret and scope, and
 * issues opaque tokens that the fake Azure upstream accepts.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import tls from 'node:tls';
import { startLoopbackServer } from './loopback-server.ts';

const TLS_DIR = join(import.meta.dirname, 'tls');
const CERT = readFileSync(join(TLS_DIR, 'localhost.crt'), 'utf8');
const KEY = readFileSync(join(TLS_DIR, 'localhost.key'), 'utf8');

/** Makes this process trust the test certificate (besides the usual roots), as NODE_EXTRA_CA_CERTS would. */
export function trustTestCertificate(): void {
  const current = tls.getCACertificates('default');
  if (!current.includes(CERT)) tls.setDefaultCACertificates([...current, CERT]);
}

export interface FakeEntraOptions {
  tenantId: string;
  clientId: string;
  clientSecret: string;
  /** Lifetime of issued tokens in seconds (default 3600). */
  expiresIn?: number;
}

export interface FakeEntra {
  /** The `authority_host` to configure (`https://127.0.0.1:<port>`). */
  readonly url: string;
  /** Tokens issued so far, oldest first. */
  readonly issued: string[];
  /** Token requests received (granted or not). */
  readonly tokenRequests: Array<Record<string, string>>;
  /** Lifetime of the tokens issued from now on. */
  setExpiresIn(seconds: number): void;
  isValid(token: string): boolean;
  close(): Promise<void>;
}

export async function startFakeEntra(options: FakeEntraOptions): Promise<FakeEntra> {
  trustTestCertificate();
  const issued: string[] = [];
  const tokenRequests: Array<Record<string, string>> = [];
  let expiresIn = options.expiresIn ?? 3600;
  let base = '';
  const https = await startLoopbackServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'https://x');
      const json = (status: number, body: unknown): void => {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(body));
      };
      const tenant = options.tenantId;
      if (req.method === 'GET' && url.pathname === `/${tenant}/v2.0/.well-known/openid-configuration`) {
        return json(200, {
          issuer: `${base}/${tenant}/v2.0`,
          authorization_endpoint: `${base}/${tenant}/oauth2/v2.0/authorize`,
          token_endpoint: `${base}/${tenant}/oauth2/v2.0/token`,
          end_session_endpoint: `${base}/${tenant}/oauth2/v2.0/logout`,
          jwks_uri: `${base}/${tenant}/discovery/v2.0/keys`,
          response_types_supported: ['code', 'id_token', 'token'],
          scopes_supported: ['openid'],
        });
      }
      if (req.method === 'POST' && url.pathname === `/${tenant}/oauth2/v2.0/token`) {
        const form = Object.fromEntries(new URLSearchParams(Buffer.concat(chunks).toString('utf8')));
        tokenRequests.push(form);
        if (form.grant_type !== 'client_credentials') return json(400, { error: 'unsupported_grant_type', error_description: 'AADSTS70003: unsupported grant type' });
        if (form.client_id !== options.clientId || form.client_secret !== options.clientSecret) {
          return json(401, { error: 'invalid_client', error_description: 'AADSTS7000215: Invalid client secret provided.' });
        }
        if (!(form.scope ?? '').split(' ').includes('https://cognitiveservices.azure.com/.default')) {
          return json(400, { error: 'invalid_scope', error_description: `AADSTS70011: invalid scope ${form.scope}` });
        }
        const token = `entra-token-${issued.length + 1}`;
        issued.push(token);
        return json(200, { token_type: 'Bearer', expires_in: expiresIn, ext_expires_in: expiresIn, access_token: token });
      }
      json(404, { error: 'not_found', error_description: `no route ${req.method} ${url.pathname}` });
    });
  }, { tls: { cert: CERT, key: KEY } });
  base = https.url;
  return {
    url: base,
    issued,
    tokenRequests,
    setExpiresIn: (seconds) => { expiresIn = seconds; },
    isValid: (token) => issued.includes(token),
    close: https.close,
  };
}
