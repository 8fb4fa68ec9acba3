/**
 * The dashboard's only way to the gateway: the public admin API, with the master key as a Bearer
 * token. The key lives in sessionStorage, so it is asked once per tab and gone when the tab closes.
 */

import type { z } from 'zod';
import type * as responses from '../../../src/http/openapi/responses.ts';

const KEY_STORAGE = 'floodgate.masterKey';

/** An error answer of the admin API (`{"error": {type, message, param, code}}`), or a network failure (status 0). */
export class ApiError extends Error {
  readonly status: number;
  readonly type: string;
  readonly param: string | null;
  readonly code: string | null;

  constructor(status: number, type: string, message: string, param: string | null, code: string | null) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.type = type;
    this.param = param;
    this.code = code;
  }

  /** The feature asked for (rate limits, budgets) is switched off on this gateway (503 feature_unavailable). */
  get featureUnavailable(): boolean {
    return this.status === 503 && this.code === 'feature_unavailable';
  }
}

export function storedKey(): string | null {
  return sessionStorage.getItem(KEY_STORAGE);
}

export function storeKey(key: string | null): void {
  if (key === null) sessionStorage.removeItem(KEY_STORAGE);
  else sessionStorage.setItem(KEY_STORAGE, key);
}

let onUnauthorized: () => void = () => {};

/** What to do when the stored key stops working (401): the app goes back to its sign-in form. */
export function setUnauthorizedHandler(handler: () => void): void {
  onUnauthorized = handler;
}

/**
 * One admin API call. `key` overrides the stored key (the sign-in check); `null` sends none (is
 * this gateway open?). Resolves with the JSON answer, rejects with an ApiError.
 */
export async function api<T>(method: string, path: string, body?: unknown, key: string | null = storedKey()): Promise<T> {
  const headers: Record<string, string> = { accept: 'application/json' };
  if (key !== null) headers.authorization = `Bearer ${key}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  let response: Response;
  try {
    response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), cache: 'no-store' });
  } catch {
    throw new ApiError(0, 'network_error', 'the gateway did not answer', null, null);
  }
  const text = await response.text();
  const json = parse(text);
  if (response.ok) return json as T;
  const error = (json as { error?: { type?: string; message?: string; param?: string | null; code?: string | null } } | undefined)?.error;
  const failure = new ApiError(response.status, error?.type ?? 'error', error?.message ?? `HTTP ${response.status}`, error?.param ?? null, error?.code ?? null);
  if (response.status === 401 && key === storedKey() && key !== null) onUnauthorized();
  throw failure;
}

function parse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

// ------------------------------------------------------------------ wire types

// The admin API's answers as its OpenAPI document describes them (types only: nothing of the
// server ends up in the bundle).
export type Scope = RuleStatus['scope'];
export type RuleStatus = z.infer<typeof responses.ruleStatusRecord>;
export type RuleList = z.infer<typeof responses.rateLimitList>;
export type ApiKey = z.infer<typeof responses.apiKeyRecord>;
export type UsageBucket = z.infer<typeof responses.usageBuckets>['buckets'][number];
export type Explanation = z.infer<typeof responses.explanation>;
export type QueueStatus = z.infer<typeof responses.queueStatus>;
export type Priority = ApiKey['max_priority'];
export type BudgetStatus = z.infer<typeof responses.budgetStatusRecord>;
export type BudgetList = z.infer<typeof responses.budgetList>;
