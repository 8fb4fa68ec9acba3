import Fastify, { LogController, type FastifyError, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { registerRequestLog } from './access-log.ts';
import { nameRequest, requestId } from './request-id.ts';
import { registerAuth, registerWithAccess } from './auth.ts';
import { registerJsonBody } from './json-body.ts';
import { registerPatience } from './patience.ts';
import { registerNulCheck } from './validation.ts';
import { registerBatches } from './routes/batches.ts';
import type { HttpServices } from './context.ts';
import { CounterStoreUnavailableError } from '../ratelimit/index.ts';
import { GatewayError, badRequest } from '../errors/gateway-error.ts';
import { dialectOf, sendError } from './errors.ts';
import { registerAdminBudgets } from './routes/admin-budgets.ts';
import { registerAdminExplain } from './routes/admin-explain.ts';
import { rateLimitsUnavailable } from '../admission/refusals.ts';
import { registerAdminKeys } from './routes/admin-keys.ts';
import { registerAdminProviders } from './routes/admin-providers.ts';
import { registerAdminQueue } from './routes/admin-queue.ts';
import { registerAdminRateLimits } from './routes/admin-rate-limits.ts';
import { registerAdminUsage } from './routes/admin-usage.ts';
import { registerDashboard } from './routes/dashboard.ts';
import { registerHealth } from './routes/health.ts';
import { countResponses, registerMetrics } from './routes/metrics.ts';
import { registerOpenApi } from './routes/openapi.ts';
import { registerModelEndpoints } from './routes/model-endpoints.ts';
import { registerPassthrough } from './routes/passthrough.ts';
import { registerRealtime, registerWebSocketUpgrades } from './routes/realtime.ts';
import { registerUsage } from './routes/usage.ts';

export function buildServer(services: HttpServices): FastifyInstance {
  const limits = services.options.connections;
  // Set once the app exists, before it serves: framework errors are answered without any hook.
  let logRefused: (request: FastifyRequest, reply: FastifyReply) => void = () => {};
  const app = Fastify({
    loggerInstance: services.options.logger,
    // Per-request log lines cost more than the proxying itself; errors are still logged.
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: services.options.bodyLimitBytes,
    return503OnClosing: true,
    forceCloseConnections: false,
    // Node times the receiving of a request only: once its body is in, the answer (a long stream
    // included) takes as long as it takes. A connection that never completes its headers (an idle
    // one included) or its body gets a 408 and is closed; an idle keep-alive one is closed.
    requestTimeout: limits.requestTimeoutMs,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    http: {
      headersTimeout: limits.headersTimeoutMs,
      requestTimeout: limits.requestTimeoutMs,
      // Node checks the two timeouts above at this interval (30 s by default, which would let a
      // connection outlive a short timeout by that much).
      connectionsCheckingInterval: Math.min(1000, Math.ceil(limits.headersTimeoutMs / 4)),
    },
    // The incoming x-request-id is judged by requestId() rather than trusted as it is.
    requestIdHeader: false,
    genReqId: requestId,
    // Fastify refuses a malformed percent-encoding in the path before any route is matched; the
    // client still gets the gateway's own error shape.
    frameworkErrors: (error, request, reply) => {
      logRefused(request, reply);
      nameRequest(reply);
      if (error.code === 'FST_ERR_BAD_URL') {
        return sendError(reply, badRequest(`malformed URL: the path ${request.url.split('?')[0]} is not valid percent-encoded UTF-8 (a literal % is written %25)`, null, 'invalid_url'));
      }
      return sendError(reply, mapFrameworkError(error, services.options.bodyLimitBytes) ?? badRequest(error.message));
    },
  });
  // Connections beyond it are closed as soon as they are accepted.
  app.server.maxConnections = limits.maxConnections;
  // One line per failed request, or per request with the access log (fastify's own request lines are off).
  logRefused = registerRequestLog(app, { access: services.options.accessLog, metrics: services.metrics });

  // Every answer names its request (errors and streams included), the id its log lines carry.
  app.addHook('onSend', (request, reply, payload, done) => {
    nameRequest(reply);
    done(null, payload);
  });

  registerOpenApi(app, { userPathHeader: services.options.userPathHeader });
  countResponses(app, services.metrics);
  registerWebSocketUpgrades(app, services);
  // Before auth: a request refused because the gateway drains needs no key checked.
  registerHealth(app, services);
  registerAuth(app, services);
  registerJsonBody(app);
  registerNulCheck(app);
  registerWithAccess(app, 'public', (scope) => registerDashboard(scope));
  registerWithAccess(app, 'model', (scope) => {
    registerPatience(scope, services.options.patience);
    registerModelEndpoints(scope, services);
    registerPassthrough(scope, services);
    registerRealtime(scope, services);
    registerBatches(scope, services);
    registerUsage(scope, services);
  });
  registerWithAccess(app, 'admin', (scope) => {
    registerAdminKeys(scope, services);
    registerAdminRateLimits(scope, services);
    registerMetrics(scope, services);
    registerAdminUsage(scope, services);
    registerAdminExplain(scope, services);
    registerAdminQueue(scope, services);
    registerAdminProviders(scope, services);
    registerAdminBudgets(scope, services);
  });

  app.setNotFoundHandler((request, reply) => {
    sendError(reply, new GatewayError({ status: 404, type: 'not_found_error', message: `no route for ${request.method} ${request.url.split('?')[0]}`, code: 'route_not_found' }), dialectOf(request));
  });

  app.setErrorHandler((error: FastifyError | GatewayError | Error, request, reply) => {
    const dialect = dialectOf(request);
    if (error instanceof GatewayError) return sendError(reply, error, dialect);
    if (error instanceof CounterStoreUnavailableError) return sendError(reply, rateLimitsUnavailable(error), dialect);
    const mapped = mapFrameworkError(error as FastifyError, services.options.bodyLimitBytes);
    if (mapped) return sendError(reply, mapped, dialect);
    request.log.error({ err: error }, 'unhandled error');
    return sendError(reply, new GatewayError({ status: 500, type: 'provider_error', message: 'internal gateway error', code: 'internal_error' }), dialect);
  });

  return app;
}

/** Fastify's own errors (body parsing, limits) get the gateway's error shape and a plain message. */
function mapFrameworkError(error: FastifyError, bodyLimit: number): GatewayError | undefined {
  switch (error.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new GatewayError({ status: 413, type: 'invalid_request_error', message: `request body exceeds the limit of ${bodyLimit} bytes`, code: 'request_too_large' });
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new GatewayError({ status: 415, type: 'invalid_request_error', message: 'unsupported content type: send application/json', code: 'unsupported_media_type' });
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new GatewayError({ status: 400, type: 'invalid_request_error', message: 'request body is empty: send a JSON object', code: 'invalid_json' });
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new GatewayError({ status: 400, type: 'invalid_request_error', message: 'content-length does not match the body', code: 'invalid_body' });
    default:
      break;
  }
  if (error.statusCode === 400 && error instanceof SyntaxError) {
    return new GatewayError({ status: 400, type: 'invalid_request_error', message: `malformed JSON body: ${error.message}`, code: 'invalid_json' });
  }
  if (typeof error.statusCode === 'number' && error.statusCode >= 400 && error.statusCode < 500) {
    return new GatewayError({ status: error.statusCode, type: 'invalid_request_error', message: error.message, code: null });
  }
  return undefined;
}
