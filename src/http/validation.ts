import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { badRequest, type GatewayError } from '../errors/gateway-error.ts';
import { hasNul, nulRefusal } from './schemas/checks.ts';

/**
 * Refuses a NUL in any URL parameter or query value on every route, before a handler can look it
 * up: ids, names and paths never hold one (see NUL_REFUSAL). Runs after authentication.
 */
export function registerNulCheck(app: FastifyInstance): void {
  app.addHook('preValidation', async (request) => {
    for (const [name, value] of Object.entries((request.params ?? {}) as Record<string, unknown>)) {
      // The passthrough route's wildcard is the upstream path.
      if (typeof value === 'string' && hasNul(value)) throw nulIn(name === '*' ? 'path' : name);
    }
    for (const [name, value] of Object.entries((request.query ?? {}) as Record<string, unknown>)) {
      if ((Array.isArray(value) ? value : [value]).some((item) => typeof item === 'string' && hasNul(item))) throw nulIn(name);
    }
  });
}

function nulIn(field: string): GatewayError {
  return badRequest(nulRefusal(field), field);
}

/**
 * Validates a JSON body (or query) with its schema, once; the 400 names the first offending field
 * in its message and its `param`.
 */
export function parseBody<T extends z.ZodType>(schema: T, body: unknown): z.output<T> {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw badRequest('request body must be a JSON object');
  const result = schema.safeParse(body);
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  if (!issue) throw badRequest('invalid request body');
  if (issue.code === 'unrecognized_keys') {
    const key = issue.keys[0] ?? '';
    const path = [...issue.path.map(String), key].join('.');
    const known = knownFields(schema, issue.path);
    throw badRequest(`${path}: unknown field${known.length > 0 ? ` (expected one of ${known.join(', ')})` : ''}`, path);
  }
  const path = issue.path.map(String).join('.');
  // A custom issue comes from a schema's transform, whose message (often the engine's) names its field already.
  if (issue.code === 'custom') throw badRequest(issue.message, path || null);
  // zod does not report the input by default: look the field up to tell "missing" from "wrong type".
  const message = issue.code === 'invalid_type' && valueAt(body, issue.path) === undefined ? 'is required' : issue.message;
  throw badRequest(path ? `${path}: ${message}` : message, path || null);
}

function valueAt(body: unknown, path: readonly PropertyKey[]): unknown {
  let value = body;
  for (const key of path) {
    if (value === null || typeof value !== 'object' || !Object.hasOwn(value, key)) return undefined;
    value = (value as Record<PropertyKey, unknown>)[key];
  }
  return value;
}

/** The fields the object schema at `path` declares, looking through transforms, optional and nullable. */
function knownFields(schema: z.ZodType, path: readonly PropertyKey[]): string[] {
  if (schema instanceof z.ZodPipe) return knownFields(schema.in as z.ZodType, path);
  if (schema instanceof z.ZodOptional || schema instanceof z.ZodNullable) return knownFields(schema.unwrap() as z.ZodType, path);
  if (!(schema instanceof z.ZodObject)) return [];
  const [key, ...rest] = path;
  if (key === undefined) return Object.keys(schema.shape);
  const field = schema.shape[String(key)] as z.ZodType | undefined;
  return field ? knownFields(field, rest) : [];
}
