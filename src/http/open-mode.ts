import type { FastifyInstance, FastifyRequest } from 'fastify';
import { GatewayError } from '../errors/gateway-error.ts';

/**
 * Without a master key every route is open. Listening on loopback keeps other machines out, but
 * not the web pages this machine's browser opens: a page can reach 127.0.0.1 with a form post or
 * a fetch, and by DNS rebinding (a name of the page's own that it points at 127.0.0.1) it can even
 * read the answers. So an open gateway answers only requests addressed to a loopback name (which
 * a rebound page cannot send: its Host is its own name), and refuses browser requests made from
 * any origin but its own (the dashboard it serves keeps working). Public routes (the health check,
 * the dashboard's page) hold nothing and change nothing: only the Host rule applies to them.
 */
export function registerOpenModeGuard(app: FastifyInstance): void {
  // A gateway is called by a handful of Host values: each is parsed once, not on every request.
  // Bounded, as any client can send any Host.
  const origins = new Map<string, string | undefined>();
  app.addHook('onRequest', async (request) => {
    const host = request.headers.host;
    // HTTP/1.1 requires Host (Node refuses a request without one); an HTTP/1.0 client without one is no browser.
    if (host === undefined) return;
    let own = origins.get(host);
    if (own === undefined && !origins.has(host)) {
      own = loopbackOrigin(host);
      if (origins.size >= KNOWN_HOSTS) origins.clear();
      origins.set(host, own);
    }
    if (own === undefined) {
      throw forbidden(
        `Host "${host}" is not a loopback name: without MASTER_KEY the gateway answers only requests addressed to localhost, 127.0.0.0/8 or [::1] (set MASTER_KEY to serve other names)`,
        'host_not_allowed',
      );
    }
    if (!request.is404 && request.routeOptions.config.access === 'public') return;
    const refusal = crossOrigin(request, own);
    if (refusal !== undefined) {
      throw forbidden(`cross-origin request refused: ${refusal}; without MASTER_KEY only pages served by the gateway itself may call it`, 'cross_origin_request');
    }
  });
}

const KNOWN_HOSTS = 64;

/** `http://<host>` when the Host header names a loopback address (any port), else undefined. */
function loopbackOrigin(host: string): string | undefined {
  let url: URL;
  try {
    url = new URL(`http://${host}`);
  } catch {
    return undefined;
  }
  // The URL parser has canonicalised the name: lower case, IPv4 in dotted decimal, IPv6 compressed.
  if (url.username !== '' || url.password !== '' || url.pathname !== '/' || url.search !== '' || url.hash !== '') return undefined;
  const name = url.hostname;
  const loopback = name === 'localhost' || name === '[::1]' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(name);
  return loopback ? url.origin : undefined;
}

/** Why a browser made this request from another origin than `own`, or undefined when it did not. */
function crossOrigin(request: FastifyRequest, own: string): string | undefined {
  const origin = first(request.headers.origin);
  if (origin !== undefined && originOf(origin) !== own) return `Origin ${origin} is not this gateway's origin ${own}`;
  const site = first(request.headers['sec-fetch-site'])?.toLowerCase();
  // `same-site` is another port or subdomain of the same site: still another origin.
  if (site === 'cross-site' || site === 'same-site') return `Sec-Fetch-Site: ${site}`;
  return undefined;
}

function originOf(text: string): string | undefined {
  try {
    return new URL(text).origin;
  } catch {
    return undefined;
  }
}

function first(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

function forbidden(message: string, code: string): GatewayError {
  return new GatewayError({ status: 403, type: 'invalid_request_error', message, code });
}
