import type { z } from 'zod';
import { badRequest } from './errors.ts';

/** Validates a JSON body; the 400 names the first offending field. */
export function parseBody<T extends z.ZodType>(schema: T, body: unknown): z.infer<T> {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw badRequest('request body must be a JSON object');
  const result = schema.safeParse(body);
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  if (!issue) throw badRequest('invalid request body');
  if (issue.code === 'unrecognized_keys') {
    const key = issue.keys[0] ?? '';
    const path = [...issue.path.map(String), key].join('.');
    throw badRequest(`${path}: unknown field`, path);
  }
  const path = issue.path.map(String).join('.');
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
