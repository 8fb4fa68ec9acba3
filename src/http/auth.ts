import type { FastifyInstance, FastifyRequest } from 'fastify';
import { extractCredential, safeEqual } from '../auth/master.ts';
import { normalizeUserPath } from '../ratelimit/normalize.ts';
import type { HttpServices, Identity } from './context.ts';
import { badRequest, unauthorized } from './errors.ts';

const ROOT_OPEN: Identity = Object.freeze({ userPath: '/', keyId: null, isMaster: true });
const ROOT_MASTER: Identity = ROOT_OPEN;

/**
 * Authenticates `/v1/*`, `/p/*` and `/admin/*` and settles the caller's user path.
 * Admin routes take only the master key; model routes the master key or a managed key.
 */
export function registerAuth(app: FastifyInstance, services: HttpServices): void {
  const { masterKey, userPathHeader } = services.options;
  app.decorateRequest('identity', null as unknown as Identity);
  // A callback hook, not an async one: authentication is synchronous, and an async hook costs a
  // promise and a microtask turn on every request.
  app.addHook('onRequest', (request, _reply, done) => {
    const url = request.url;
    const isAdmin = url.startsWith('/admin/') || url === '/admin';
    if (isAdmin || url.startsWith('/v1/') || url.startsWith('/p/')) {
      try {
        request.identity = authenticate(request, services, masterKey, userPathHeader, isAdmin);
      } catch (err) {
        done(err as Error);
        return;
      }
    }
    done();
  });
}

function authenticate(
  request: FastifyRequest,
  services: HttpServices,
  masterKey: string | undefined,
  userPathHeader: string,
  isAdmin: boolean,
): Identity {
  const credential = extractCredential(request.headers);
  if (masterKey !== undefined) {
    if (credential === undefined) throw unauthorized('missing API key: send Authorization: Bearer <key>');
    if (safeEqual(credential, masterKey)) return withHeaderPath(request, userPathHeader, ROOT_MASTER);
    if (isAdmin) throw unauthorized('admin routes require the master key');
    const key = services.keys.lookup(credential);
    if (!key) throw unauthorized('invalid API key');
    if (key.userPath !== null) return { userPath: key.userPath, keyId: key.id, isMaster: false };
    return withHeaderPath(request, userPathHeader, { userPath: '/', keyId: key.id, isMaster: false });
  }
  // Open mode (loopback only): a managed key still binds its path when one is presented.
  if (credential !== undefined && !isAdmin) {
    const key = services.keys.lookup(credential);
    if (key?.userPath) return { userPath: key.userPath, keyId: key.id, isMaster: false };
    if (key) return withHeaderPath(request, userPathHeader, { userPath: '/', keyId: key.id, isMaster: false });
  }
  return withHeaderPath(request, userPathHeader, ROOT_OPEN);
}

/**
 * Valid user-path header values, already normalized. Callers send the same few values over and
 * over; bounded because the values are client-chosen (cleared, not evicted one by one: cheap, and
 * a full cache only means normalizing again).
 */
const headerPaths = new Map<string, string>();
const HEADER_PATHS_MAX = 10_000;
/** Identities of open/master callers per normalized path, shared (frozen) instead of built per request. */
const rootIdentities = new Map<string, Identity>();

function withHeaderPath(request: FastifyRequest, header: string, base: Identity): Identity {
  const raw = request.headers[header];
  if (raw === undefined) return base;
  const value = Array.isArray(raw) ? raw[0] ?? '' : raw;
  let path = headerPaths.get(value);
  if (path === undefined) {
    const normalized = normalizeUserPath(value, `${header} header`);
    if (!normalized.ok) throw badRequest(normalized.error, header, 'invalid_user_path');
    path = normalized.value;
    if (headerPaths.size >= HEADER_PATHS_MAX) {
      headerPaths.clear();
      rootIdentities.clear();
    }
    headerPaths.set(value, path);
  }
  if (path === base.userPath) return base;
  if (base !== ROOT_OPEN) return { ...base, userPath: path };
  let identity = rootIdentities.get(path);
  if (identity === undefined) {
    identity = Object.freeze({ ...ROOT_OPEN, userPath: path });
    rootIdentities.set(path, identity);
  }
  return identity;
}
