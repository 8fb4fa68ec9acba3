import websocket from '@fastify/websocket';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { upstreamError } from '../../errors/from-provider.ts';
import { GatewayError, badRequest, notFound, unsupportedByProvider } from '../../errors/gateway-error.ts';
import { RealtimeConnectError } from '../../providers/realtime-socket.ts';
import { QUEUE_WAIT_HEADER, type Lifetime } from '../../admission/core.ts';
import { Cancellation } from '../../providers/cancellation.ts';
import type { RealtimeAbility, RealtimeUpstream } from '../../providers/types.ts';
import type { AdmissionTicket } from '../../ratelimit/index.ts';
import { bridge } from '../../realtime/bridge.ts';
import type { Target } from '../../routing/types.ts';
import type { HttpServices } from '../context.ts';
import { realtimeQuery } from '../schemas/realtime.ts';
import { parseBody } from '../validation.ts';

/** What realtime sessions use: the resolver, the admission core, metrics and the clock. */
type RealtimeServices = Pick<HttpServices, 'resolver' | 'admission' | 'metrics' | 'now'>;

/** A session admitted and connected upstream in preHandler, waiting for its client socket. */
interface Prepared {
  target: Target;
  upstream: RealtimeUpstream;
  lifetime: SessionLifetime;
  startedAt: number;
}

/**
 * Installs WebSocket upgrades on the whole server. It must come before the auth hook: its
 * onRequest hook marks upgrade requests and its onResponse hook destroys the socket of an upgrade
 * answered with plain HTTP (401, 404, 429). Registered after auth, a refused upgrade would keep
 * its socket open, and with it the server's shutdown.
 */
export function registerWebSocketUpgrades(app: FastifyInstance, services: Pick<HttpServices, 'options'>): void {
  app.register(websocket, {
    options: {
      perMessageDeflate: false,
      maxPayload: services.options.bodyLimitBytes,
      // The SDKs offer `realtime` (plus the key and beta markers); accept with `realtime` only,
      // never echoing the key subprotocol back.
      handleProtocols: (protocols) => (protocols.has('realtime') ? 'realtime' : false),
    },
    // On shutdown, open sessions are told why (1001 going away) instead of a bare close.
    preClose(done) {
      for (const client of this.websocketServer.clients) client.close(1001, 'gateway shutting down');
      this.websocketServer.close(() => done());
    },
  });
}

/**
 * `GET /v1/realtime?model=`: a WebSocket proxied both ways to the provider's realtime socket.
 * Everything that can refuse a session (auth, model, admission, the provider's own handshake)
 * happens before the upgrade, so a refused client gets a plain HTTP error with its headers,
 * never an accepted-then-closed socket. The session holds its concurrency slots until either
 * side closes.
 */
export function registerRealtime(app: FastifyInstance, services: RealtimeServices): void {
  const prepared = new WeakMap<FastifyRequest, Prepared>();
  app.register(async (scope) => {
    scope.route({
      method: 'GET',
      url: '/v1/realtime',
      preHandler: async (request) => {
        if (!request.ws) return;
        prepared.set(request, await prepare(request, services));
      },
      handler: async () => {
        throw new GatewayError({ status: 426, type: 'invalid_request_error', message: 'realtime sessions need a WebSocket upgrade (GET /v1/realtime?model=... with Upgrade: websocket)', code: 'upgrade_required', headers: { upgrade: 'websocket' } });
      },
      wsHandler: (socket, request) => {
        const session = prepared.get(request);
        prepared.delete(request);
        if (session === undefined) {
          socket.close(1011, 'session was not prepared');
          return;
        }
        const { target } = session;
        // The 101 is written by the WebSocket library, never through fastify's reply: counted here.
        services.metrics.responded(request.routeOptions.url, 101);
        const line = request.logLine;
        line.status = 101;
        // The session's line is written when it ends, with every response's usage.
        const logged = line.hold();
        bridge(socket, session.upstream, {
          now: services.now,
          onEnd: () => {
            session.lifetime.end();
            logged();
          },
          onUsage: (usage, startedAt) => {
            const record = services.admission.complete(request.identity, {
              provider: target.provider.name, model: target.model, endpoint: 'realtime', usage, status: 200, startedAt, cached: false, requestId: request.id,
            });
            line.used(usage, record);
          },
          // Budgets are checked before each response of the session, not only when it opens.
          refusal: () => services.admission.budgetBreach(request.identity.userPath)?.message,
        });
      },
    });
  });
}

async function prepare(request: FastifyRequest, services: Pick<HttpServices, 'resolver' | 'admission' | 'now'>): Promise<Prepared> {
  const { model } = parseBody(realtimeQuery, request.query);
  request.logLine.model = model;
  const route = services.resolver.resolve(model);
  if (!route) throw notFound(`model "${model}" not found`, 'model_not_found');
  // Every target an alias may pick must serve realtime, so that a refusal does not depend on the turn.
  for (const target of route.primary) realtimeOf(target);
  const lifetime = new SessionLifetime();
  // The TCP socket outlives every path (refused, upgraded, dropped): its close frees the slots
  // even if the WebSocket handler never runs.
  request.raw.socket.once('close', () => lifetime.end());
  try {
    const { target, headers } = await services.admission.admitSession(request.identity, route, lifetime);
    request.logLine.waitMs = Number(headers?.[QUEUE_WAIT_HEADER] ?? 0);
    request.logLine.attempt(target);
    const upstream = await openUpstream(target);
    return { target, upstream, lifetime, startedAt: services.now() };
  } catch (err) {
    lifetime.end();
    throw err;
  }
}

/** A session's slot, held from its admission until either side closes. */
class SessionLifetime implements Lifetime {
  readonly cancel = new Cancellation();
  #held: AdmissionTicket | undefined;
  #ended = false;

  hold(ticket: AdmissionTicket): void {
    if (this.#ended) ticket.release();
    else this.#held = ticket;
  }

  /** Idempotent. A session still waiting for capacity leaves the queue. */
  end(): void {
    if (this.#ended) return;
    this.#ended = true;
    this.cancel.cancel();
    this.#held?.release();
  }
}

function realtimeOf(target: Target): RealtimeAbility {
  const realtime = target.provider.realtime;
  if (realtime === undefined) throw unsupportedByProvider('realtime sessions', target.provider, 'model');
  return realtime;
}

async function openUpstream(target: Target): Promise<RealtimeUpstream> {
  try {
    return await realtimeOf(target).connect(target.model);
  } catch (err) {
    if (!(err instanceof RealtimeConnectError)) throw err;
    if (err.body !== '') throw upstreamError(err.status, Buffer.from(err.body), {});
    throw new GatewayError({ status: 502, type: 'provider_error', message: `provider ${target.provider.name}: ${err.message}`, code: 'upstream_unavailable' });
  }
}
