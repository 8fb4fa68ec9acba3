import type { FastifyInstance, FastifyRequest } from 'fastify';
import { extractCredential, safeEqual } from '../auth/master.ts';
import type { ApiKeyRecord } from '../storage/keys/types.ts';
import { normalizeUserPath } from '../user-path/user-path.ts';
import type { HttpServices, Identity } from './context.ts';
import { badRequest, unauthorized } from '../errors/gateway-error.ts';
import { registerOpenModeGuard } from './open-mode.ts';

/**
 * Who may call a route: `public` needs no key (`/health`), `admin` only the master key, `model`
 * the master key or a managed key.
 */
export type Access = 'public' | 'admin' | 'model';

declare module 'fastify' {
  interface FastifyContextConfig {
    access?: Access;
  }
}

/**
 * Registers a family of routes that all need `access`. The access level is stamped on every route
 * the family registers, nested plugins included, so a route cannot join the family without it.
 */
export function registerWithAccess(app: FastifyInstance, access: Access, register: (scope: FastifyInstance) => void): void {
  app.register(async (scope) => {
    scope.addHook('onRoute', (route) => {
      route.config = { ...route.config, access };
    });
    register(scope);
  });
}

/**
 * Authenticates every request against the route the router matched, never against the URL's
 * text: the router decodes and normalises the URL (percent-encoding, absolute-form targets), so
 * any test on the raw text can be spelled around. A matched route that declares no access level
 * is treated as admin-only, so a route added without one fails closed. A request no route matches
 * needs no key: it gets the 404. Without a master key, requests from web pages are kept out instead
 * (see open-mode.ts).
 */
export function registerAuth(app: FastifyInstance, services: Pick<HttpServices, 'options' | 'keys'>): void {
  const { masterKey, userPathHeader } = services.options;
  app.decorateRequest('identity', null as unknown as Identity);
  if (masterKey === undefined) registerOpenModeGuard(app);
  app.addHook('onRequest', async (request) => {
    if (request.is404) return;
    const access = request.routeOptions.config.access ?? 'admin';
    if (access === 'public') return;
    request.identity = authenticate(request, services, masterKey, userPathHeader, access === 'admin');
  });
}

function authenticate(
  request: FastifyRequest,
  services: Pick<HttpServices, 'keys'>,
  masterKey: string | undefined,
  userPathHeader: string,
  adminOnly: boolean,
): Identity {
  const credential = extractCredential(request.headers);
  if (masterKey !== undefined) {
    if (credential === undefined) throw unauthorized('missing API key: send Authorization: Bearer <key>');
    if (safeEqual(credential, masterKey)) return { userPath: headerPath(request, userPathHeader), keyId: null, isMaster: true };
    if (adminOnly) throw unauthorized('admin routes require the master key');
    const key = services.keys.lookup(credential);
    if (!key) throw unauthorized('invalid API key');
    return managedIdentity(request, key, userPathHeader);
  }
  // Open mode (loopback only): a managed key still binds its path when one is presented.
  const key = credential !== undefined && !adminOnly ? services.keys.lookup(credential) : undefined;
  if (key) return managedIdentity(request, key, userPathHeader);
  return { userPath: headerPath(request, userPathHeader), keyId: null, isMaster: true };
}

/** A managed key's caller: its bound path (else the header's), and its key's highest priority. */
function managedIdentity(request: FastifyRequest, key: ApiKeyRecord, userPathHeader: string): Identity {
  return { userPath: key.userPath ?? headerPath(request, userPathHeader), keyId: key.id, isMaster: false, maxPriority: key.maxPriority };
}

/** The user path from the user-path header, normalised; `/` without one. */
function headerPath(request: FastifyRequest, header: string): string {
  const raw = request.headers[header];
  if (raw === undefined) return '/';
  const text = utf8HeaderValue(Array.isArray(raw) ? raw[0] ?? '' : raw);
  if (text === undefined) throw badRequest(`${header} header is not valid UTF-8`, header, 'invalid_user_path');
  const normalized = normalizeUserPath(text, `${header} header`);
  if (!normalized.ok) throw badRequest(normalized.error, header, 'invalid_user_path');
  return normalized.value;
}

const HIGH_BYTES = /[\u0080-\u00ff]/;
const UTF8 = new TextDecoder('utf-8', { fatal: true });

/**
 * Node hands header values over byte for byte as latin1; user paths are UTF-8 wherever they enter
 * (JSON bodies, query strings, config), so the header's bytes are read as UTF-8 too. Undefined when
 * they are not valid UTF-8.
 */
function utf8HeaderValue(latin1: string): string | undefined {
  if (!HIGH_BYTES.test(latin1)) return latin1;
  try {
    return UTF8.decode(Buffer.from(latin1, 'latin1'));
  } catch {
    return undefined;
  }
}
