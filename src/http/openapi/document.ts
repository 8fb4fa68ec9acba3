/**
 * The OpenAPI 3.1 document, assembled from the routes the server registered and, for each, its
 * documentation entry (operations.ts): request bodies and queries are the zod schemas that
 * validate them, converted to JSON Schema on their input side. Nothing here is attached to the
 * routes themselves, so documenting a route never changes how it validates or answers.
 */
import { z } from 'zod';
import { QUEUE_WAIT_HEADER } from '../../admission/core.ts';
import { PRIORITIES } from '../../ratelimit/index.ts';
import type { Access } from '../auth.ts';
import { MAX_WAIT_HEADER, PRIORITY_HEADER } from '../patience.ts';
import { WAIT_SECONDS } from '../schemas/checks.ts';
import type { BodyExample } from './examples.ts';
import { anthropicErrorBody, errorBody } from './responses.ts';

/** A route as fastify's onRoute hook sees it; `config.access` is read when the document is built. */
export interface RegisteredRoute {
  readonly method: string | readonly string[];
  readonly url: string;
  readonly config?: { readonly access?: Access | undefined } | undefined;
}

/** Statuses an operation can answer with the error record, besides 401 (added to every route that needs a key). */
export type ErrorStatus = 400 | 403 | 404 | 405 | 409 | 413 | 415 | 426 | 429 | 502 | 503;

export interface OperationDoc {
  readonly operationId: string;
  readonly summary: string;
  readonly description?: string;
  /** Default: `admin` for admin routes (always), `models` for model routes, `gateway` for public ones. */
  readonly tag?: string;
  readonly params?: Readonly<Record<string, string>>;
  readonly query?: z.ZodType;
  readonly body?: { readonly schema: z.ZodType; readonly contentType?: string; readonly required?: boolean; readonly examples?: Readonly<Record<string, BodyExample>> };
  readonly success: {
    readonly status: number;
    readonly description: string;
    readonly schema?: z.ZodType;
    readonly contentType?: string;
    /** Answers `text/event-stream` too when the body asks for `stream: true`. */
    readonly streams?: boolean;
    /** Carries the `x-ratelimit-*` headers when a windowed rule matched. */
    readonly rateLimitHeaders?: boolean;
  };
  readonly errors: readonly ErrorStatus[];
  /** Answers in a shape of their own (not the error record), besides the success. */
  readonly otherAnswers?: ReadonlyArray<{ readonly status: number; readonly description: string; readonly schema: z.ZodType }>;
  /** `/v1/messages` answers errors in the Anthropic shape. */
  readonly anthropicErrors?: boolean;
}

/** Entries keyed `METHOD /url` with the router's pattern (`ALL` for a route on every method). */
export type OperationTable = Readonly<Record<string, OperationDoc>>;

export const OPENAPI_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'] as const;
type OpenApiMethod = (typeof OPENAPI_METHODS)[number];

type Json = Record<string, unknown>;

const ERROR_DESCRIPTIONS: Record<ErrorStatus | 401, string> = {
  400: 'Invalid request: the message and `param` name the offending field.',
  401: 'Missing or wrong key.',
  403: 'The user path\'s file quota is used up (`file_quota_exceeded`, `files.max_bytes_per_user_path` or `files.max_files_per_user_path`).',
  404: 'Not found.',
  405: 'A method passthrough does not forward (`method_not_allowed`): only GET, POST, PUT, PATCH and DELETE are.',
  409: 'The rule or budget comes from the configuration and cannot be changed through the API (`rule_managed_by_config`, `budget_managed_by_config`).',
  413: 'The body exceeds `server.body_limit`.',
  415: 'Unsupported content type.',
  426: 'A realtime session needs a WebSocket upgrade.',
  429: 'Rate limited (`rate_limit_exceeded`), by the gateway or passed on from the provider, or a budget reached (`budget_exceeded`); `Retry-After` says when to retry.',
  502: 'The provider failed, or answered beyond the gateway\'s bounds (`upstream_response_too_large`); an upstream error status is passed on with type `provider_error`.',
  503: 'The feature is disabled on this gateway (`feature_unavailable`), no target is available, the shared rate-limit counters cannot be reached (`rate_limits_unavailable`), or the gateway is shutting down (`gateway_draining`: send the request again).',
};

const RATE_LIMIT_HEADERS = ['x-ratelimit-limit-requests', 'x-ratelimit-remaining-requests', 'x-ratelimit-reset-requests', 'x-ratelimit-limit-tokens', 'x-ratelimit-remaining-tokens', 'x-ratelimit-reset-tokens'];

export interface DocumentOptions {
  /** Named schemas, shown under components.schemas and referenced from the operations. */
  readonly schemas: Readonly<Record<string, z.ZodType>>;
  readonly operations: OperationTable;
  /** Where the gateway listens (OpenAPI `servers`). */
  readonly servers: readonly Json[];
  /** The header carrying the caller's user path (`server.user_path_header`), declared on every model operation. */
  readonly userPathHeader: string;
}

export function buildOpenApiDocument(routes: readonly RegisteredRoute[], options: DocumentOptions): Json {
  const names = new Map<z.ZodType, string>();
  const registry = z.registry<{ id: string }>();
  for (const [name, schema] of Object.entries({ Error: errorBody, AnthropicError: anthropicErrorBody, ...options.schemas })) {
    names.set(schema, name);
    registry.add(schema, { id: name });
  }
  const converted = z.toJSONSchema(registry, { io: 'input', unrepresentable: 'any', uri: (id) => `#/components/schemas/${id}` }).schemas;
  const schemas: Json = {};
  for (const [name, schema] of Object.entries(converted)) schemas[name] = withoutIdentity(schema as Json);
  const schemaOf = (schema: z.ZodType): Json => {
    const name = names.get(schema);
    return name === undefined ? withoutIdentity(z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as Json) : { $ref: `#/components/schemas/${name}` };
  };

  const paths: Record<string, Record<string, Json>> = {};
  const tags = new Set<string>();
  for (const { route, method } of operationsOf(routes)) {
    const access = route.config?.access ?? 'admin';
    const exact = options.operations[`${method.toUpperCase()} ${route.url}`];
    const onEveryMethod = options.operations[`ALL ${route.url}`];
    const doc = exact ?? onEveryMethod ?? undocumented(method, route.url);
    const tag = access === 'admin' ? 'admin' : (doc.tag ?? (access === 'model' ? 'models' : 'gateway'));
    tags.add(tag);
    (paths[openApiPath(route.url)] ??= {})[method] = {
      // One entry documents a route on every method: each operation's id names its method.
      operationId: exact === undefined && onEveryMethod !== undefined ? doc.operationId + capitalized(method) : doc.operationId,
      summary: doc.summary,
      ...(doc.description !== undefined && { description: doc.description }),
      tags: [tag],
      ...(access === 'public' && { security: [] }),
      ...parametersOf(route.url, doc, access === 'model' ? options.userPathHeader : undefined),
      ...(doc.body !== undefined && method !== 'get' && method !== 'head' && {
        requestBody: {
          required: doc.body.required ?? true,
          content: {
            [doc.body.contentType ?? 'application/json']: {
              schema: schemaOf(doc.body.schema),
              ...(doc.body.examples !== undefined && { examples: doc.body.examples }),
            },
          },
        },
      }),
      responses: responsesOf(doc, access !== 'public', access === 'model', schemaOf),
    };
  }

  return {
    openapi: '3.1.0',
    info: {
      title: 'Floodgate',
      version: '1.0',
      description: 'An AI gateway: one OpenAI-compatible API in front of several LLM providers, with scoped rate limiting.',
    },
    servers: options.servers,
    security: [{ bearerAuth: [] }, { apiKeyAuth: [] }],
    tags: [...tags].sort().map((name) => ({ name })),
    paths,
    components: {
      schemas,
      securitySchemes: {
        bearerAuth: {
          type: 'http',
          scheme: 'bearer',
          bearerFormat: 'JWT',
          description: 'Authorization: Bearer <key>. Admin operations take the master key only; model operations the master key or a managed key.',
        },
        apiKeyAuth: { type: 'apiKey', in: 'header', name: 'x-api-key', description: 'The same key in x-api-key (sent by the Anthropic SDK).' },
      },
      headers: {
        'Retry-After': { description: 'Seconds until a retry would be admitted.', schema: { type: 'integer', minimum: 1 } },
        'retry-after-ms': { description: 'The same in milliseconds.', schema: { type: 'integer', minimum: 1000 } },
        [QUEUE_WAIT_HEADER]: {
          description: `On every answer to a request that waited for capacity (${MAX_WAIT_HEADER}), its 429 included: the milliseconds it waited.`,
          schema: { type: 'integer', minimum: 0 },
        },
        ...Object.fromEntries(RATE_LIMIT_HEADERS.map((name) => [name, {
          description: 'From the matching rule with the least remaining in that dimension; reset values are whole seconds.',
          schema: { type: 'integer' },
        }])),
      },
    },
  };
}

/**
 * Each route's operations in OpenAPI's methods (QUERY and the like have none). A HEAD route
 * beside a GET on the same URL answers as the GET without a body: it is not listed apart.
 */
export function operationsOf(routes: readonly RegisteredRoute[]): Array<{ route: RegisteredRoute; method: OpenApiMethod }> {
  const out: Array<{ route: RegisteredRoute; method: OpenApiMethod }> = [];
  const withGet = new Set<string>();
  for (const route of routes) if (methodsOf(route).includes('get')) withGet.add(route.url);
  for (const route of routes) {
    for (const method of methodsOf(route)) {
      if (method === 'head' && withGet.has(route.url)) continue;
      out.push({ route, method });
    }
  }
  return out;
}

function methodsOf(route: RegisteredRoute): OpenApiMethod[] {
  const methods = typeof route.method === 'string' ? [route.method] : route.method;
  return methods.map((m) => m.toLowerCase()).filter((m): m is OpenApiMethod => (OPENAPI_METHODS as readonly string[]).includes(m));
}

/** `/admin/api-keys/:id` → `/admin/api-keys/{id}`; a trailing wildcard becomes `{path}`. */
export function openApiPath(url: string): string {
  return url.replace(/:(\w+)/g, '{$1}').replace(/\*$/, '{path}');
}

function pathParameterNames(url: string): string[] {
  const names = [...url.matchAll(/:(\w+)/g)].map((m) => m[1]!);
  if (url.endsWith('*')) names.push('path');
  return names;
}

function parametersOf(url: string, doc: OperationDoc, userPathHeader: string | undefined): { parameters?: Json[] } {
  const parameters: Json[] = pathParameterNames(url).map((name) => ({
    name,
    in: 'path',
    required: true,
    schema: { type: 'string' },
    ...(doc.params?.[name] !== undefined && { description: doc.params[name] }),
  }));
  if (doc.query !== undefined) {
    // Each field of the query's object schema is one parameter.
    const query = z.toJSONSchema(doc.query, { io: 'input', unrepresentable: 'any' }) as Json;
    const properties = (query.properties ?? {}) as Record<string, Json>;
    const required = new Set((query.required ?? []) as string[]);
    for (const [name, schema] of Object.entries(properties)) {
      const { description, ...rest } = schema;
      parameters.push({ name, in: 'query', required: required.has(name), schema: rest, ...(description !== undefined && { description }) });
    }
  }
  if (userPathHeader !== undefined) {
    parameters.push(
      {
        name: userPathHeader,
        in: 'header',
        required: false,
        schema: { type: 'string', examples: ['/team/alice'] },
        description: 'The caller\'s user path (rate limits, budgets, usage), `/` without it. Ignored for a managed key bound to a user path.',
      },
      {
        name: MAX_WAIT_HEADER,
        in: 'header',
        required: false,
        schema: { type: 'string', pattern: WAIT_SECONDS.source, examples: ['20', '0.5'] },
        description: 'How long a request the rate limits refuse may wait for capacity instead of a 429 at once, in seconds (at most 3 decimals); default `rate_limits.queue.default_wait_seconds`, never more than `rate_limits.queue.max_wait_seconds`. Anything else is a 400 naming this header.',
      },
      {
        name: PRIORITY_HEADER,
        in: 'header',
        required: false,
        schema: { type: 'string', enum: [...PRIORITIES], default: 'normal' },
        description: 'The request\'s priority: the order of the queue, and its share of every cap with `rate_limits.queue.headroom`. A managed key is served at most at its `max_priority`. Anything else is a 400 naming this header.',
      },
    );
  }
  return parameters.length > 0 ? { parameters } : {};
}

/**
 * `waits`: a model operation, whose requests may wait for capacity; the ones that admit (those
 * with rate-limit headers on their success, and their 429) then say how long they waited.
 */
function responsesOf(doc: OperationDoc, needsKey: boolean, waits: boolean, schemaOf: (schema: z.ZodType) => Json): Json {
  const { success } = doc;
  const content: Json = {};
  if (success.schema !== undefined || success.contentType !== undefined) {
    content[success.contentType ?? 'application/json'] = success.schema === undefined ? {} : { schema: schemaOf(success.schema) };
  }
  if (success.streams) content['text/event-stream'] = { schema: { type: 'string', description: 'Server-sent events, when the body sets stream: true.' } };
  const responses: Json = {
    [String(success.status)]: {
      description: success.description,
      ...(success.rateLimitHeaders && { headers: headerRefs([...RATE_LIMIT_HEADERS, ...(waits ? [QUEUE_WAIT_HEADER] : [])]) }),
      ...(Object.keys(content).length > 0 && { content }),
    },
  };
  for (const other of doc.otherAnswers ?? []) {
    responses[String(other.status)] = { description: other.description, content: { 'application/json': { schema: schemaOf(other.schema) } } };
  }
  const errorSchema = schemaOf(doc.anthropicErrors ? anthropicErrorBody : errorBody);
  const statuses: Array<ErrorStatus | 401> = [...doc.errors, ...(needsKey ? [401 as const] : [])].sort((a, b) => a - b);
  for (const status of statuses) {
    responses[String(status)] = {
      description: ERROR_DESCRIPTIONS[status],
      ...(status === 429 && { headers: headerRefs(['Retry-After', 'retry-after-ms', ...(waits ? [QUEUE_WAIT_HEADER] : [])]) }),
      content: { 'application/json': { schema: errorSchema } },
    };
  }
  return responses;
}

/** References to headers of components.headers, by name. */
function headerRefs(names: readonly string[]): Json {
  return Object.fromEntries(names.map((name) => [name, { $ref: `#/components/headers/${name}` }]));
}

/** A route without an entry in the table still appears, described by its method and pattern. */
function undocumented(method: OpenApiMethod, url: string): OperationDoc {
  const words = url.split(/[^A-Za-z0-9]+/).filter(Boolean);
  return {
    operationId: method + words.map(capitalized).join(''),
    summary: `${method.toUpperCase()} ${url}`,
    success: { status: 200, description: 'OK' },
    errors: [],
  };
}

function capitalized(word: string): string {
  return word.charAt(0).toUpperCase() + word.slice(1);
}

/** JSON Schema identity keywords zod adds, which have no place inside an OpenAPI document. */
function withoutIdentity(schema: Json): Json {
  const { $schema: _schema, $id: _id, ...rest } = schema;
  return rest;
}
